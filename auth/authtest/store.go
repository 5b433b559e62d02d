package authtest

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// Store is an in-memory auth.Store. The zero value is not ready: use
// NewStore.
type Store struct {
	mu       sync.Mutex
	nextID   int64
	users    map[int64]*auth.User
	sessions map[string]session // by token hash
	devices  map[string]device  // by nonce hash
	resets   map[string]*token  // by token hash
	unlocks  map[string]*token  // by token hash
	signIns  map[string]*token  // by token hash
	lockouts []lockout
}

var _ auth.Store = (*Store)(nil)

type session struct {
	userID             int64
	createdAt, expires time.Time
	ends               time.Time // Session.EndsAt
	mustChangePassword bool
	publicID           string
	network, browser   string
	lastSeen           time.Time
}

type device struct {
	userID            int64
	created, lastSeen time.Time
	publicID          string
	verified          bool
}

type token struct {
	userID           int64
	created, expires time.Time
	used             bool
	usedAt           time.Time
	// passwordHash binds a sign-in token to the hash it was made with.
	passwordHash string
	// changeNotice: the reset link of a change's notice, which a password
	// change leaves.
	changeNotice bool
}

type lockout struct {
	auth.Lockout
	cleared bool
	by      string
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{
		users:    map[int64]*auth.User{},
		sessions: map[string]session{},
		devices:  map[string]device{},
		resets:   map[string]*token{},
		unlocks:  map[string]*token{},
		signIns:  map[string]*token{},
	}
}

func (s *Store) byEmail(email string) *auth.User {
	for _, u := range s.users {
		if u.Email == email {
			return u
		}
	}
	return nil
}

// CreateUser implements auth.UserStore.
func (s *Store) CreateUser(_ context.Context, email, passwordHash string, admin bool) (auth.User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byEmail(email) != nil {
		return auth.User{}, auth.ErrUserExists
	}
	s.nextID++
	now := time.Now()
	u := &auth.User{ID: s.nextID, Email: email, PasswordHash: passwordHash, IsAdmin: admin, CreatedAt: now, UpdatedAt: now}
	s.users[u.ID] = u
	return *u, nil
}

// UserByEmail implements auth.UserStore.
func (s *Store) UserByEmail(_ context.Context, email string) (auth.User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.byEmail(email); u != nil {
		return *u, nil
	}
	return auth.User{}, auth.ErrNoUser
}

// RehashPassword implements auth.UserStore.
func (s *Store) RehashPassword(_ context.Context, userID int64, old, hash string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[userID]
	if u == nil || u.PasswordHash != old {
		return auth.ErrPasswordChanged
	}
	u.PasswordHash, u.UpdatedAt = hash, time.Now()
	return nil
}

// SetPassword implements auth.UserStore.
func (s *Store) SetPassword(_ context.Context, email, hash string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.byEmail(email)
	if u == nil {
		return 0, auth.ErrNoUser
	}
	s.replacePassword(u, hash)
	return u.ID, nil
}

// ChangePassword implements auth.UserStore.
func (s *Store) ChangePassword(_ context.Context, userID int64, old, hash string, sessionHash, newSessionHash, keepDevice []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[userID]
	if u == nil || u.PasswordHash != old {
		return auth.ErrPasswordChanged
	}
	kept, ok := s.sessions[string(sessionHash)]
	if !ok || kept.userID != userID {
		return auth.ErrNoSession
	}
	u.PasswordHash, u.UpdatedAt = hash, time.Now()
	kept.mustChangePassword = false
	deleteWhere(s.sessions, func(v session) bool { return v.userID == userID })
	s.sessions[string(newSessionHash)] = kept
	keep := string(keepDevice)
	for k, d := range s.devices {
		if d.userID == userID && (keepDevice == nil || k != keep) {
			delete(s.devices, k)
		}
	}
	deleteWhere(s.unlocks, func(v *token) bool { return v.userID == userID && !v.used })
	for _, r := range s.resets {
		if r.userID == userID && !r.used && !r.changeNotice {
			r.used = true
		}
	}
	return nil
}

// replacePassword does what a reset and an operator's new password do:
// the new hash, no sessions, no devices, no open unlock or reset links.
func (s *Store) replacePassword(u *auth.User, hash string) {
	u.PasswordHash, u.UpdatedAt = hash, time.Now()
	s.signOut(u.ID)
	for _, r := range s.resets {
		if r.userID == u.ID {
			r.used = true
		}
	}
}

func (s *Store) signOut(userID int64) {
	deleteWhere(s.sessions, func(v session) bool { return v.userID == userID })
	deleteWhere(s.devices, func(v device) bool { return v.userID == userID })
	deleteWhere(s.unlocks, func(v *token) bool { return v.userID == userID && !v.used })
}

// deleteWhere deletes the entries of m for which drop is true.
func deleteWhere[V any](m map[string]V, drop func(V) bool) {
	for k, v := range m {
		if drop(v) {
			delete(m, k)
		}
	}
}

// CreateSession implements auth.SessionStore.
func (s *Store) CreateSession(_ context.Context, tokenHash []byte, sess auth.Session, passwordHash string, signOuts int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[sess.UserID]
	if u == nil || u.PasswordHash != passwordHash || u.SignOuts != signOuts || u.Disabled() {
		return auth.ErrPasswordChanged
	}
	id := sess.PublicID
	if id == "" {
		id = auth.NewPublicID() // as Postgres's default
	}
	ends := sess.EndsAt
	if ends.IsZero() {
		ends = sess.ExpiresAt // as Postgres's COALESCE
	}
	s.sessions[string(tokenHash)] = session{userID: sess.UserID, createdAt: sess.CreatedAt, expires: sess.ExpiresAt, ends: ends,
		mustChangePassword: sess.MustChangePassword, publicID: id, network: sess.Network, browser: sess.Browser,
		lastSeen: sess.CreatedAt}
	return nil
}

// SessionByHash implements auth.SessionStore.
func (s *Store) SessionByHash(_ context.Context, tokenHash []byte, now time.Time) (auth.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.sessions[string(tokenHash)]
	u := s.users[v.userID]
	if !ok || u == nil || !v.expires.After(now) {
		return auth.Session{}, auth.ErrNoSession
	}
	return auth.Session{UserID: u.ID, Email: u.Email, IsAdmin: u.IsAdmin, CreatedAt: v.createdAt, ExpiresAt: v.expires,
		EndsAt: v.ends, MustChangePassword: v.mustChangePassword, PublicID: v.publicID, Network: v.network, Browser: v.browser,
		LastSeenAt: v.lastSeen}, nil
}

// TouchSession implements auth.SessionStore.
func (s *Store) TouchSession(_ context.Context, tokenHash []byte, at time.Time, minGap time.Duration, idleEnd time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.sessions[string(tokenHash)]; ok && !v.lastSeen.After(at.Add(-minGap)) && v.expires.After(at) {
		v.lastSeen, v.expires = at, v.ends
		if !idleEnd.IsZero() && idleEnd.Before(v.ends) {
			v.expires = idleEnd
		}
		s.sessions[string(tokenHash)] = v
	}
	return nil
}

// AccountSessions implements auth.SessionStore.
func (s *Store) AccountSessions(_ context.Context, userID int64, now time.Time, limit int) ([]auth.SessionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []auth.SessionInfo
	for _, v := range s.sessions {
		if v.userID == userID && v.expires.After(now) {
			out = append(out, auth.SessionInfo{PublicID: v.publicID, CreatedAt: v.createdAt, LastSeenAt: v.lastSeen,
				ExpiresAt: v.expires, Network: v.network, Browser: v.browser})
		}
	}
	slices.SortFunc(out, func(a, b auth.SessionInfo) int {
		return cmp.Or(b.LastSeenAt.Compare(a.LastSeenAt), b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.PublicID, b.PublicID))
	})
	return out[:min(limit, len(out))], nil
}

// AccountDevices implements auth.SessionStore.
func (s *Store) AccountDevices(_ context.Context, userID int64, limit int) ([]auth.DeviceInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []auth.DeviceInfo
	for _, d := range s.devices {
		if d.userID == userID {
			out = append(out, auth.DeviceInfo{PublicID: d.publicID, CreatedAt: d.created, LastSeenAt: d.lastSeen})
		}
	}
	slices.SortFunc(out, func(a, b auth.DeviceInfo) int {
		return cmp.Or(b.LastSeenAt.Compare(a.LastSeenAt), b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.PublicID, b.PublicID))
	})
	return out[:min(limit, len(out))], nil
}

// ownerGone is the answer to a request of account userID's session
// stored under byHash when either is gone (auth.ErrNoUser,
// auth.ErrNoSession), nil while both live; s.mu is held.
func (s *Store) ownerGone(userID int64, byHash []byte) error {
	if s.users[userID] == nil {
		return auth.ErrNoUser
	}
	if v, ok := s.sessions[string(byHash)]; !ok || v.userID != userID {
		return auth.ErrNoSession
	}
	return nil
}

// EndSession implements auth.SessionStore.
func (s *Store) EndSession(_ context.Context, userID int64, byHash []byte, publicID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ownerGone(userID, byHash); err != nil {
		return err
	}
	for k, v := range s.sessions {
		if v.userID == userID && v.publicID == publicID {
			delete(s.sessions, k)
			return nil
		}
	}
	return auth.ErrNotListed
}

// EndOtherSessions implements auth.SessionStore.
func (s *Store) EndOtherSessions(_ context.Context, userID int64, keepHash []byte) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ownerGone(userID, keepHash); err != nil {
		return 0, err
	}
	s.users[userID].SignOuts++
	deleteWhere(s.signIns, func(v *token) bool { return v.userID == userID && !v.used })
	var n int64
	for k, v := range s.sessions {
		if v.userID == userID && k != string(keepHash) {
			delete(s.sessions, k)
			n++
		}
	}
	return n, nil
}

// ForgetDevice implements auth.SessionStore.
func (s *Store) ForgetDevice(_ context.Context, userID int64, byHash []byte, publicID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ownerGone(userID, byHash); err != nil {
		return err
	}
	for k, d := range s.devices {
		if d.userID == userID && d.publicID == publicID {
			delete(s.devices, k)
			return nil
		}
	}
	return auth.ErrNotListed
}

// LegacySessionsLive implements auth.SessionStore: this store holds no
// session made before session tokens were tagged.
func (s *Store) LegacySessionsLive(context.Context, time.Time) (bool, error) { return false, nil }

// DeleteSession implements auth.SessionStore.
func (s *Store) DeleteSession(_ context.Context, tokenHash []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, string(tokenHash))
	return nil
}

// SignOutEverywhere implements auth.SessionStore.
func (s *Store) SignOutEverywhere(_ context.Context, email string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.byEmail(email)
	if u == nil {
		return 0, auth.ErrNoUser
	}
	u.SignOuts++
	s.signOut(u.ID)
	deleteWhere(s.signIns, func(v *token) bool { return v.userID == u.ID && !v.used })
	return u.ID, nil
}

// KnownDevice implements auth.DeviceStore.
func (s *Store) KnownDevice(_ context.Context, email string, nonceHash []byte, seenAfter time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.devices[string(nonceHash)]
	u := s.users[d.userID]
	return ok && u != nil && u.Email == email && d.lastSeen.After(seenAfter), nil
}

// AddDevice implements auth.DeviceStore.
func (s *Store) AddDevice(_ context.Context, userID int64, passwordHash string, signOuts int64, nonceHash []byte, at time.Time, max int, verified bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[userID]
	if u == nil || (passwordHash != "" && (u.PasswordHash != passwordHash || u.SignOuts != signOuts)) {
		return auth.ErrPasswordChanged
	}
	s.addDevice(userID, nonceHash, at, max, verified)
	return nil
}

// addDevice adds a device, verified or not, and forgets the account's
// least recently used beyond max.
func (s *Store) addDevice(userID int64, nonceHash []byte, at time.Time, max int, verified bool) {
	id := auth.NewPublicID()
	if d, ok := s.devices[string(nonceHash)]; ok && d.userID == userID {
		id = d.publicID
	}
	s.devices[string(nonceHash)] = device{userID: userID, created: at, lastSeen: at, publicID: id, verified: verified}
	var mine []string
	for k, d := range s.devices {
		if d.userID == userID {
			mine = append(mine, k)
		}
	}
	slices.SortFunc(mine, func(a, b string) int {
		da, db := s.devices[a], s.devices[b]
		return cmp.Or(db.lastSeen.Compare(da.lastSeen), db.created.Compare(da.created))
	})
	for _, k := range mine[min(max, len(mine)):] {
		delete(s.devices, k)
	}
}

// ForgetNewDevices implements auth.DeviceStore.
func (s *Store) ForgetNewDevices(_ context.Context, since time.Time, also []int64) ([]auth.User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hit := map[int64]bool{}
	deleteWhere(s.devices, func(d device) bool {
		if d.created.Before(since) || d.verified {
			return false
		}
		hit[d.userID] = true
		return true
	})
	deleteWhere(s.sessions, func(v session) bool {
		return (hit[v.userID] || slices.Contains(also, v.userID)) && !v.createdAt.Before(since)
	})
	var out []auth.User
	for id := range hit {
		out = append(out, auth.User{ID: id, Email: s.users[id].Email})
	}
	slices.SortFunc(out, func(a, b auth.User) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// TouchDevice implements auth.DeviceStore.
func (s *Store) TouchDevice(_ context.Context, nonceHash []byte, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.devices[string(nonceHash)]; ok {
		d.lastSeen = at
		s.devices[string(nonceHash)] = d
	}
	return nil
}

// AddResetToken implements auth.ResetTokenStore.
func (s *Store) AddResetToken(_ context.Context, tokenHash []byte, userID int64, createdAt, expiresAt time.Time, changeNotice bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.users[userID]; u == nil || u.Disabled() {
		return auth.ErrNoUser
	}
	s.resets[string(tokenHash)] = &token{userID: userID, created: createdAt, expires: expiresAt, changeNotice: changeNotice}
	return nil
}

// live returns the token under hash if it is unused and expires after now.
func live(m map[string]*token, hash []byte, now time.Time) *token {
	t := m[string(hash)]
	if t == nil || t.used || !t.expires.After(now) {
		return nil
	}
	return t
}

// ResetTokenUser implements auth.ResetTokenStore.
func (s *Store) ResetTokenUser(_ context.Context, tokenHash []byte, now time.Time) (int64, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := live(s.resets, tokenHash, now)
	if t == nil || s.users[t.userID] == nil {
		return 0, "", auth.ErrInvalidToken
	}
	return t.userID, s.users[t.userID].Email, nil
}

// ResetPassword implements auth.ResetTokenStore.
func (s *Store) ResetPassword(_ context.Context, tokenHash []byte, now time.Time, hash string) (int64, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := live(s.resets, tokenHash, now)
	if t == nil || s.users[t.userID] == nil {
		return 0, "", auth.ErrInvalidToken
	}
	for _, o := range s.resets {
		if o.userID == t.userID && !o.used {
			o.used, o.usedAt = true, now
		}
	}
	u := s.users[t.userID]
	s.replacePassword(u, hash)
	return u.ID, u.Email, nil
}

// AddUnlockToken implements auth.UnlockTokenStore.
func (s *Store) AddUnlockToken(_ context.Context, tokenHash []byte, userID int64, createdAt, expiresAt time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.users[userID]; u == nil || u.Disabled() {
		return auth.ErrNoUser
	}
	s.unlocks[string(tokenHash)] = &token{userID: userID, created: createdAt, expires: expiresAt}
	return nil
}

// UnlockTokenLive implements auth.UnlockTokenStore.
func (s *Store) UnlockTokenLive(_ context.Context, tokenHash []byte, now time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return live(s.unlocks, tokenHash, now) != nil, nil
}

// UseUnlockToken implements auth.UnlockTokenStore.
func (s *Store) UseUnlockToken(_ context.Context, tokenHash []byte, now time.Time, nonceHash []byte, maxDevices int) (int64, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := live(s.unlocks, tokenHash, now)
	if t == nil || s.users[t.userID] == nil {
		return 0, "", auth.ErrInvalidToken
	}
	t.used, t.usedAt = true, now
	s.addDevice(t.userID, nonceHash, now, maxDevices, true)
	return t.userID, s.users[t.userID].Email, nil
}

// AddSignInToken implements auth.SignInTokenStore.
func (s *Store) AddSignInToken(_ context.Context, tokenHash []byte, userID int64, passwordHash string, signOuts int64, createdAt, expiresAt time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[userID]
	if u == nil || u.Disabled() {
		return auth.ErrNoUser
	}
	if u.PasswordHash != passwordHash || u.SignOuts != signOuts {
		return auth.ErrPasswordChanged
	}
	s.signIns[string(tokenHash)] = &token{userID: userID, created: createdAt, expires: expiresAt, passwordHash: passwordHash}
	return nil
}

// liveSignIn returns the sign-in token under hash if it is unused, expires
// after now and its account still has the password it was made with.
func (s *Store) liveSignIn(hash []byte, now time.Time) (*token, *auth.User) {
	t := live(s.signIns, hash, now)
	if t == nil {
		return nil, nil
	}
	u := s.users[t.userID]
	if u == nil || u.PasswordHash != t.passwordHash {
		return nil, nil
	}
	return t, u
}

// SignInTokenLive implements auth.SignInTokenStore.
func (s *Store) SignInTokenLive(_ context.Context, tokenHash []byte, now time.Time) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, u := s.liveSignIn(tokenHash, now)
	if t == nil {
		return "", nil
	}
	return u.Email, nil
}

// UseSignInToken implements auth.SignInTokenStore.
func (s *Store) UseSignInToken(_ context.Context, tokenHash []byte, now time.Time, nonceHash []byte, maxDevices int) (auth.User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, u := s.liveSignIn(tokenHash, now)
	if t == nil {
		return auth.User{}, auth.ErrInvalidToken
	}
	t.used, t.usedAt = true, now
	s.addDevice(u.ID, nonceHash, now, maxDevices, true)
	return *u, nil
}

// RecordLockout implements auth.LockoutLog.
func (s *Store) RecordLockout(_ context.Context, l auth.Lockout) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.ID = int64(len(s.lockouts) + 1)
	s.lockouts = append(s.lockouts, lockout{Lockout: l})
	return nil
}

// ClearLockout implements auth.LockoutLog.
func (s *Store) ClearLockout(_ context.Context, account string, at time.Time, by string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range s.lockouts {
		if l.Account == account && !l.cleared && l.LockedUntil.After(at) {
			s.lockouts[i].cleared, s.lockouts[i].by = true, by
		}
	}
	return nil
}

// EndLockouts implements auth.LockoutLog.
func (s *Store) EndLockouts(_ context.Context, now time.Time, limit int) ([]auth.Lockout, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ended []int // the first to end first, as Postgres takes them
	for i, l := range s.lockouts {
		if !l.cleared && !l.LockedUntil.After(now) {
			ended = append(ended, i)
		}
	}
	slices.SortFunc(ended, func(a, b int) int { return s.lockouts[a].LockedUntil.Compare(s.lockouts[b].LockedUntil) })
	var out []auth.Lockout
	for _, i := range ended[:min(limit, len(ended))] {
		s.lockouts[i].cleared, s.lockouts[i].by = true, auth.LockoutExpired
		out = append(out, s.lockouts[i].Lockout)
	}
	return out, nil
}

// LockoutListed implements auth.LockoutLog.
func (s *Store) LockoutListed(_ context.Context, account string, now time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lockouts {
		if l.Account == account && !l.cleared && l.LockedUntil.After(now) {
			return true, nil
		}
	}
	return false, nil
}

// ActiveLockouts implements auth.LockoutLog.
func (s *Store) ActiveLockouts(_ context.Context, now time.Time, limit int) ([]auth.Lockout, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	latest := map[string]auth.Lockout{}
	for _, l := range s.lockouts {
		if l.cleared || !l.LockedUntil.After(now) {
			continue
		}
		if cur, ok := latest[l.Account]; !ok || !l.LockedAt.Before(cur.LockedAt) {
			latest[l.Account] = l.Lockout
		}
	}
	out := make([]auth.Lockout, 0, len(latest))
	for _, l := range latest {
		out = append(out, l)
	}
	// Newest first, equal times by the newest row, as Postgres orders them.
	slices.SortFunc(out, func(a, b auth.Lockout) int { return cmp.Or(b.LockedAt.Compare(a.LockedAt), cmp.Compare(b.ID, a.ID)) })
	return out[:min(limit, len(out))], nil
}

// LockoutsToHold implements auth.LockoutLog.
func (s *Store) LockoutsToHold(ctx context.Context, now time.Time, limit int) ([]auth.Lockout, error) {
	all, _ := s.ActiveLockouts(ctx, now, math.MaxInt)
	all = slices.DeleteFunc(all, func(l auth.Lockout) bool { return strings.HasPrefix(l.Account, auth.SecondStepLockPrefix) })
	// Stable: each part keeps ActiveLockouts' order, newest first.
	slices.SortStableFunc(all, func(a, b auth.Lockout) int {
		return cmp.Or(cmp.Compare(btoi(strings.HasPrefix(a.Account, "app ")), btoi(strings.HasPrefix(b.Account, "app "))),
			cmp.Compare(btoi(a.UserID == 0), btoi(b.UserID == 0)))
	})
	return all[:min(limit, len(all))], nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Sweep implements auth.Sweeper. Security events and their batches are
// not kept here, and lockouts are kept for good: it removes none of them.
func (s *Store) Sweep(_ context.Context, kind auth.SweepKind, before time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	count := func(drop bool) bool {
		if drop {
			n++
		}
		return drop
	}
	switch kind {
	case auth.SweepSessions:
		deleteWhere(s.sessions, func(v session) bool { return count(v.expires.Before(before)) })
	case auth.SweepResetTokens:
		deleteWhere(s.resets, func(v *token) bool { return count(v.spentOrExpired().Before(before)) })
	case auth.SweepUnlockTokens:
		deleteWhere(s.unlocks, func(v *token) bool { return count(v.spentOrExpired().Before(before)) })
	case auth.SweepSignInTokens:
		deleteWhere(s.signIns, func(v *token) bool { return count(v.spentOrExpired().Before(before)) })
	case auth.SweepDevices:
		deleteWhere(s.devices, func(v device) bool { return count(v.lastSeen.Before(before)) })
	case auth.SweepSecurityEvents, auth.SweepEventBatches, auth.SweepLockouts:
	default:
		return 0, fmt.Errorf("authtest: no records of kind %q to sweep", kind)
	}
	return int64(n), nil
}

func (t *token) spentOrExpired() time.Time {
	if t.used {
		return t.usedAt
	}
	return t.expires
}

// Sessions returns how many sessions the account has.
func (s *Store) Sessions(userID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.sessions {
		if v.userID == userID {
			n++
		}
	}
	return n
}

// Devices returns how many known devices the account has.
func (s *Store) Devices(userID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.devices {
		if v.userID == userID {
			n++
		}
	}
	return n
}
