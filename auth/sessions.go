package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"time"
)

// Session is a signed-in browser. Only the SHA-256 of its token is stored,
// so a copy of the database does not sign anyone in.
type Session struct {
	// Token is the cookie value; set only when the session is created.
	Token     string
	UserID    int64
	Email     string
	IsAdmin   bool
	CreatedAt time.Time
	// ExpiresAt is when the session ends unless used again: the sooner of
	// EndsAt and, with Config.SessionIdle, its idle end (idleEnd).
	ExpiresAt time.Time
	// EndsAt is the latest the session lasts, however often it is used:
	// SessionTTL after its sign-in, and so its cookie's expiry.
	EndsAt time.Time
	// MustChangePassword limits the session to changing the password
	// (and signing out) until it is changed: it was made by a known
	// device with a password found in a breach corpus (breached.go).
	MustChangePassword bool
	// PublicID names the session in the account's list of sessions; it
	// is random and says nothing of the token.
	PublicID string
	// Network is the network the session signed in from (Client.Source),
	// Browser a description of its User-Agent (DescribeBrowser).
	Network, Browser string
	// LastSeenAt is when the session was last used, to the minute
	// (sessionTouchGap).
	LastSeenAt time.Time
}

// SessionInfo is one session as the account's owner sees it listed.
type SessionInfo struct {
	PublicID                         string
	CreatedAt, LastSeenAt, ExpiresAt time.Time
	Network, Browser                 string
	// Current marks the session the list was asked for with.
	Current bool
}

// DeviceInfo is one known device as the account's owner sees it listed.
type DeviceInfo struct {
	PublicID              string
	CreatedAt, LastSeenAt time.Time
}

// newToken returns 256 random bits in unpadded base64url (43 characters)
// and the hash to store: the tokens of links, second steps and ceremonies.
// A session's token is made by sessionTokens, with a tag.
func newToken() (token string, hash []byte) {
	var b [32]byte
	rand.Read(b[:])
	token = base64.RawURLEncoding.EncodeToString(b[:])
	return token, hashToken(token)
}

func hashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// wellFormedToken rejects garbage before it costs a query.
func wellFormedToken(token string) bool {
	if len(token) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(token)
	return err == nil
}

// createSession starts a session for u.
//
// The session is made only while passwordHash, the hash the sign-in
// verified, is still the account's, and no browser was signed out
// everywhere since u was read (ErrPasswordChanged otherwise), so no
// session made with a replaced password outlives the replacement, nor one
// made by a sign-in under way the sign-out.
func (s *Service) createSession(ctx context.Context, u User, passwordHash string, c Client) (Session, error) {
	return s.createSessionWith(ctx, u, passwordHash, false, c)
}

// createSessionWith is createSession for a session that, with
// mustChangePassword, can only change the password. c's network and
// browser are noted for the account's list of sessions.
func (s *Service) createSessionWith(ctx context.Context, u User, passwordHash string, mustChangePassword bool, c Client) (Session, error) {
	token, hash := s.sessionTokens.new()
	now := s.now()
	end := now.Add(s.cfg.SessionTTL)
	sess := Session{Token: token, UserID: u.ID, Email: u.Email, IsAdmin: u.IsAdmin, CreatedAt: now, ExpiresAt: s.expiry(now, end), EndsAt: end,
		MustChangePassword: mustChangePassword, PublicID: NewPublicID(), Network: c.Source(), Browser: DescribeBrowser(c.UserAgent),
		LastSeenAt: now}
	err := s.store.CreateSession(ctx, hash, sess, passwordHash, u.SignOuts)
	if errors.Is(err, ErrPasswordChanged) {
		return Session{}, err
	}
	if err != nil {
		return Session{}, s.dbDown("creating session", err)
	}
	return sess, nil
}

// Session returns the live session a token names, or ErrNoSession.
func (s *Service) Session(ctx context.Context, token string) (Session, error) {
	if !s.sessionTokenWorthAQuery(ctx, token, legacyRecheckTime) {
		return Session{}, ErrNoSession
	}
	now := s.now()
	key := sha256.Sum256([]byte(token))
	if s.endedSessions.has(key, now) {
		return Session{}, ErrNoSession
	}
	sess, err := s.store.SessionByHash(ctx, key[:], now)
	if errors.Is(err, ErrNoSession) {
		s.endedSessions.add(key, now)
		return Session{}, err
	}
	if err != nil {
		return Session{}, s.dbDown("reading session", err)
	}
	// Made while SessionTTL was longer, its stored end is later than the
	// TTL now allows: it ends by the TTL in force, as the idle time below.
	if end := s.sessionEnd(sess.CreatedAt); end.Before(sess.EndsAt) {
		if !now.Before(end) {
			return Session{}, ErrNoSession
		}
		sess.EndsAt = end
		if end.Before(sess.ExpiresAt) {
			sess.ExpiresAt = end
		}
	}
	if s.cfg.SessionIdle > 0 && !now.Before(s.idleEnd(sess.LastSeenAt)) {
		// Unused for longer than the idle time, which was longer, or not
		// set, when it was last used: its expiry was not moved then.
		return Session{}, ErrNoSession
	}
	if now.Sub(sess.LastSeenAt) >= sessionTouchGap {
		// Compared in memory first, so that a session in use costs one
		// write a minute, not one a request; the store's condition keeps
		// that bound across replicas. A failed touch loses a last-seen
		// time, and moves no idle end, but not the request.
		var idleEnd time.Time
		if s.cfg.SessionIdle > 0 {
			idleEnd = s.idleEnd(now)
		}
		if err := s.store.TouchSession(ctx, key[:], now, sessionTouchGap, idleEnd); err != nil {
			s.log.WarnContext(ctx, "session last use not noted", "err", err)
		} else {
			sess.LastSeenAt, sess.ExpiresAt = now, s.expiry(now, sess.EndsAt)
		}
	}
	return sess, nil
}

// sessionTouchGap is how stale a session's last-seen time may get: it is
// written at most once per gap, whatever the number of requests.
const sessionTouchGap = time.Minute

// idleEnd is when a session last noted as used at lastSeen ends unused
// under Config.SessionIdle. Its uses within sessionTouchGap after lastSeen
// are not noted, so the gap is added: a session ends between SessionIdle
// and a minute more after its last use, never before.
func (s *Service) idleEnd(lastSeen time.Time) time.Time {
	return lastSeen.Add(s.cfg.SessionIdle + sessionTouchGap)
}

// sessionEnd is the latest a session signed in at createdAt lasts under
// the SessionTTL in force, which may be shorter than the one it was made
// under.
func (s *Service) sessionEnd(createdAt time.Time) time.Time {
	return createdAt.Add(s.cfg.SessionTTL)
}

// expiry is the ExpiresAt of a session that ends at end, used at at.
func (s *Service) expiry(at, end time.Time) time.Time {
	if s.cfg.SessionIdle > 0 {
		if idle := s.idleEnd(at); idle.Before(end) {
			return idle
		}
	}
	return end
}

// NewPublicID returns 128 random bits in hex: the name of a session or a
// device in the account's lists, which says nothing of its token.
func NewPublicID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// wellFormedPublicID rejects garbage before it costs a query.
func wellFormedPublicID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// Logout ends the session a token names; an unknown token is not an error.
func (s *Service) Logout(ctx context.Context, token string) error {
	if !s.sessionTokenWorthAQuery(ctx, token, legacyRetryTime) {
		return nil
	}
	key, now := sha256.Sum256([]byte(token)), s.now()
	if s.endedSessions.has(key, now) {
		return nil
	}
	err := s.store.DeleteSession(ctx, key[:])
	s.sessionCache.forget(key)
	if err != nil {
		return s.dbDown("ending session", err)
	}
	s.endedSessions.add(key, now)
	return nil
}

// Events of the account's owner managing its sessions and devices; their
// Detail has by=owner.
const (
	// EventSessionEnded: the owner ended one session (Detail "scope" is
	// "one", "current" when it was the one they used) or every other one
	// ("others", with "count").
	EventSessionEnded = "session_ended"
	// EventDeviceForgotten: the owner forgot one known device.
	EventDeviceForgotten = "device_forgotten"
)

// maxListed bounds the sessions and the devices an account's list shows.
const maxListed = 100

// AccountSessions is what the account's owner sees of where it is signed
// in.
type AccountSessions struct {
	// Sessions are the live sessions, the most recently used first, the
	// caller's marked Current.
	Sessions []SessionInfo
	// Devices are the known devices, the most recently used first.
	Devices []DeviceInfo
}

// checkAccountLimit passes a signed-in request of sess about the account's
// sessions and devices through RuleAccountIP.
func (s *Service) checkAccountLimit(ctx context.Context, sess Session, c Client) error {
	d, err := s.decide(ctx, s.rules(FlowAccount, Subject{Client: c, Account: sess.Email})...)
	if err != nil {
		return unavailable("checking limits", err)
	}
	if !d.Allowed {
		return &LimitedError{RetryAfter: d.RetryAfter}
	}
	return nil
}

// accountGone answers a request of a signed-in owner whose account the
// store found gone (ErrNoUser): deleted, on another replica or from the
// command line, after the request's session was read, and every session
// of it with it. The caller has no session; nothing was written. This
// replica's cache, which may still remember the session for the proxies,
// is emptied, as the deletion would have emptied it here.
func (s *Service) accountGone() error {
	s.sessionCache.purge()
	return ErrNoSession
}

// ownerDown is dbDown for the store's answer to a request of a signed-in
// owner, but for ErrNoUser, which is accountGone's.
func (s *Service) ownerDown(what string, err error) error {
	if errors.Is(err, ErrNoUser) {
		return s.accountGone()
	}
	return s.dbDown(what, err)
}

// ListSessions lists the sessions and known devices of sess's account
// (sess as Session returned it), marking sess's own.
//
// Errors: *LimitedError, ErrUnavailable.
func (s *Service) ListSessions(ctx context.Context, sess Session, c Client) (AccountSessions, error) {
	if err := s.checkAccountLimit(ctx, sess, c); err != nil {
		return AccountSessions{}, err
	}
	now := s.now()
	list, err := s.store.AccountSessions(ctx, sess.UserID, now, maxListed)
	if err != nil {
		return AccountSessions{}, s.dbDown("listing sessions", err)
	}
	// A session made while the idle time was longer or off, and unused
	// since for longer than it is now, ends at its next request (Session)
	// and is listed no more; one still in use ends unused by its idle end.
	live := list[:0]
	for _, v := range list {
		// So is one made while SessionTTL was longer, past the one now.
		end := s.sessionEnd(v.CreatedAt)
		if !now.Before(end) {
			continue
		}
		if end.Before(v.ExpiresAt) {
			v.ExpiresAt = end
		}
		if s.cfg.SessionIdle > 0 {
			idle := s.idleEnd(v.LastSeenAt)
			if !now.Before(idle) {
				continue
			}
			if idle.Before(v.ExpiresAt) {
				v.ExpiresAt = idle
			}
		}
		v.Current = v.PublicID == sess.PublicID
		live = append(live, v)
	}
	list = live
	devices, err := s.store.AccountDevices(ctx, sess.UserID, maxListed)
	if err != nil {
		return AccountSessions{}, s.dbDown("listing devices", err)
	}
	return AccountSessions{Sessions: list, Devices: devices}, nil
}

// EndSession ends the session named id of sess's account, the caller's
// own included (current reports that it was); token is sess's. An id
// that is malformed, unknown or another account's is ErrNotListed, all
// alike. A session that ended after it was read (its password changed,
// it was ended from another browser) ends nothing: ErrNoSession.
//
// Errors: *LimitedError, ErrNotListed, ErrNoSession, ErrUnavailable.
func (s *Service) EndSession(ctx context.Context, sess Session, token, id string, c Client) (current bool, err error) {
	if err := s.checkAccountLimit(ctx, sess, c); err != nil {
		return false, err
	}
	if !wellFormedPublicID(id) {
		return false, ErrNotListed
	}
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	err = s.store.EndSession(ctx, sess.UserID, hashToken(token), id)
	if errors.Is(err, ErrNotListed) || errors.Is(err, ErrNoSession) {
		// Nothing ended: the cache, which every replica's forward-auth
		// answers lean on, is kept.
		return false, err
	}
	s.sessionCache.purge()
	if err != nil {
		return false, s.ownerDown("ending session", err)
	}
	current = id == sess.PublicID
	scope := "one"
	if current {
		scope = "current"
	}
	s.record(Event{Kind: EventSessionEnded, Account: sess.Email, UserID: sess.UserID, Source: c.Source(),
		Detail: map[string]string{"by": "owner", "scope": scope}})
	return current, nil
}

// EndOtherSessions ends every session of sess's account but the one of
// token ("sign out everywhere else") and returns how many it ended. Known
// devices stay known: it is changing the password that forgets them. A
// session that ended after it was read ends none: ErrNoSession.
//
// Errors: *LimitedError, ErrNoSession, ErrUnavailable.
func (s *Service) EndOtherSessions(ctx context.Context, sess Session, token string, c Client) (int64, error) {
	if err := s.checkAccountLimit(ctx, sess, c); err != nil {
		return 0, err
	}
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	n, err := s.store.EndOtherSessions(ctx, sess.UserID, hashToken(token))
	if errors.Is(err, ErrNoSession) {
		return 0, err
	}
	if n > 0 || err != nil {
		s.sessionCache.purge()
	}
	if err != nil {
		return 0, s.ownerDown("ending other sessions", err)
	}
	s.record(Event{Kind: EventSessionEnded, Account: sess.Email, UserID: sess.UserID, Source: c.Source(),
		Detail: map[string]string{"by": "owner", "scope": "others", "count": strconv.FormatInt(n, 10)}})
	return n, nil
}

// ForgetDevice forgets the known device named id of sess's account: its
// next sign-in is a new device's; token is sess's. An id that is
// malformed, unknown or another account's is ErrNotListed, all alike. A
// session that ended after it was read forgets nothing: ErrNoSession.
//
// Errors: *LimitedError, ErrNotListed, ErrNoSession, ErrUnavailable.
func (s *Service) ForgetDevice(ctx context.Context, sess Session, token, id string, c Client) error {
	if err := s.checkAccountLimit(ctx, sess, c); err != nil {
		return err
	}
	if !wellFormedPublicID(id) {
		return ErrNotListed
	}
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	err := s.store.ForgetDevice(ctx, sess.UserID, hashToken(token), id)
	if errors.Is(err, ErrNotListed) || errors.Is(err, ErrNoSession) {
		return err
	}
	if err != nil {
		return s.ownerDown("forgetting device", err)
	}
	s.deviceCache.purge()
	s.record(Event{Kind: EventDeviceForgotten, Account: sess.Email, UserID: sess.UserID, Source: c.Source(),
		Detail: map[string]string{"by": "owner"}})
	return nil
}
