package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/xcloak/xcloak/ratelimit"
)

// Account administration: what an administrator does to other accounts
// from the dashboard or the command line. Every action is a security
// event whose Detail "by" names who did it ("admin:ann@example.com",
// "cli"), as Unlock and SignOutEverywhere do.
//
// A disabled account keeps its row and history but signs in nowhere: its
// sign-in fails exactly as a wrong password does (login.go), it is mailed
// nothing (resets.go), its sessions end as it is disabled and no session,
// reset, unlock or sign-in link of it works while it stays disabled.
//
// The last enabled administrator can be neither demoted, disabled nor
// deleted (ErrLastAdmin); the store decides that under one lock, so two
// administrators demoting each other at once leave one of them.

// Errors of account administration.
var (
	// ErrLastAdmin: the action would leave no enabled administrator.
	ErrLastAdmin = errors.New("auth: the last administrator cannot be demoted, disabled or deleted")
	// ErrUserDisabled: the action needs an enabled account (a reset link
	// for a disabled one would not work).
	ErrUserDisabled = errors.New("auth: account is disabled")
)

// errNoUserAdmin: the service was made without Deps.Users.
var errNoUserAdmin = errors.New("no account administration store")

// MaxUserPage bounds the accounts of one page of SearchUsers.
const MaxUserPage = 100

// RecentUserEvents is how many of an account's events its page shows.
const RecentUserEvents = 20

// UserAdminStore keeps what account administration reads and changes
// (package postgres keeps it in Postgres).
type UserAdminStore interface {
	// SearchUsers lists the accounts whose email starts with prefix ("":
	// every one), in the byte order of their emails, after the email
	// after ("": from the first), at most limit.
	SearchUsers(ctx context.Context, prefix, after string, limit int) ([]User, error)
	// UserByID returns the account id; ErrNoUser if none.
	UserByID(ctx context.Context, id int64) (User, error)
	// DisableUser disables account id as of at (one already disabled
	// keeps its time) and, at once, ends its sessions, forgets its known
	// devices, spends its open reset, unlock and sign-in links and counts
	// a sign-out (User.SignOuts), which ends its sign-ins under way: a
	// held second step, a session or link a sign-in is about to make;
	// it returns the account. ErrNoUser, ErrLastAdmin.
	DisableUser(ctx context.Context, id int64, at time.Time) (User, error)
	// EnableUser enables account id and returns it; ErrNoUser.
	EnableUser(ctx context.Context, id int64) (User, error)
	// SetUserAdmin makes account id an administrator or not and returns
	// it. ErrNoUser, ErrLastAdmin (demoting the last enabled one).
	SetUserAdmin(ctx context.Context, id int64, admin bool) (User, error)
	// DeleteUser deletes account id with its sessions, devices and links,
	// keeping its security events and lockout records, and returns it as
	// it was. ErrNoUser, ErrLastAdmin.
	DeleteUser(ctx context.Context, id int64) (User, error)
	// CountSessions counts the sessions of account userID that expire
	// after now, were signed in after createdAfter and, unless usedAfter
	// is zero, were last used after it.
	CountSessions(ctx context.Context, userID int64, now, usedAfter, createdAfter time.Time) (int, error)
	// AccountLockout returns the latest lockout of account in force at
	// now; false if none.
	AccountLockout(ctx context.Context, account string, now time.Time) (Lockout, bool, error)
}

// UserPage is one page of SearchUsers.
type UserPage struct {
	Users []User
	// Next is the cursor (the after) of the next page; "" on the last.
	Next string
}

// UserDetail is what an administrator sees of one account.
type UserDetail struct {
	User User
	// Sessions counts its live sessions.
	Sessions int
	// Devices are its known devices, the most recently used first, at
	// most MaxDevices.
	Devices []DeviceInfo
	// Lockout is its password's lockout in force, if Locked.
	Locked  bool
	Lockout Lockout
	// SecondStepLocks are its second step's locks in force (Lockout.Step):
	// its own step's, its passkeys' alone, its held answers'.
	SecondStepLocks []Lockout
}

// ParseUserQuery turns what an administrator typed in the search into
// the prefix of normalised emails it searches: trimmed and lower-cased as
// NormaliseEmail does. Bad input is a *FieldError.
func ParseUserQuery(q string) (string, error) {
	// Checked before lower-casing too: ToLower turns bytes that are not
	// UTF-8 into U+FFFD, which would search for what nobody typed.
	if !utf8.ValidString(q) {
		return "", &FieldError{Field: "q", Message: "is not valid UTF-8"}
	}
	q = strings.ToLower(strings.TrimSpace(q))
	if err := checkEmailPart(q); err != nil {
		return "", &FieldError{Field: "q", Message: err.Error()}
	}
	return q, nil
}

// checkEmailPart refuses what cannot be part of a stored email.
func checkEmailPart(s string) error {
	if len(s) > MaxEmailBytes {
		return fmt.Errorf("is longer than %d bytes", MaxEmailBytes)
	}
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return errors.New("holds spaces or control characters")
		}
	}
	return nil
}

func (s *Service) userAdmin() (UserAdminStore, error) {
	if s.users == nil {
		return nil, unavailable("administering accounts", errNoUserAdmin)
	}
	return s.users, nil
}

// SearchUsers lists a page of the accounts whose email starts with query
// (ParseUserQuery), by email, after the cursor after (a previous page's
// Next; "" for the first page), at most limit (1 to MaxUserPage).
// Errors: ErrInvalidRequest (*FieldError), ErrUnavailable.
func (s *Service) SearchUsers(ctx context.Context, query, after string, limit int) (UserPage, error) {
	st, err := s.userAdmin()
	if err != nil {
		return UserPage{}, err
	}
	if limit < 1 || limit > MaxUserPage {
		return UserPage{}, fmt.Errorf("%w: page of %d accounts", ErrInvalidRequest, limit)
	}
	prefix, err := ParseUserQuery(query)
	if err != nil {
		return UserPage{}, err
	}
	// Stored emails are lower case: "Root@Example.com" continues after
	// root@example.com, not from the first page. Checked before
	// lower-casing too, as ParseUserQuery does.
	if !utf8.ValidString(after) {
		return UserPage{}, &FieldError{Field: "after", Message: "is not valid UTF-8"}
	}
	after = strings.ToLower(strings.TrimSpace(after))
	if err := checkEmailPart(after); err != nil {
		return UserPage{}, &FieldError{Field: "after", Message: err.Error()}
	}
	// One more than the page says whether another follows.
	users, err := st.SearchUsers(ctx, prefix, after, limit+1)
	if err != nil {
		return UserPage{}, s.dbDown("searching accounts", err)
	}
	page := UserPage{Users: users}
	if len(users) > limit {
		page.Users = users[:limit]
		page.Next = users[limit-1].Email
	}
	return page, nil
}

// UserByID returns an account; ErrNoUser if none.
func (s *Service) UserByID(ctx context.Context, id int64) (User, error) {
	st, err := s.userAdmin()
	if err != nil {
		return User{}, err
	}
	u, err := st.UserByID(ctx, id)
	if err != nil && !errors.Is(err, ErrNoUser) {
		return User{}, s.dbDown("reading account", err)
	}
	return u, err
}

// UserDetail returns what an administrator sees of account id (its
// events are the event search's); ErrNoUser if none.
func (s *Service) UserDetail(ctx context.Context, id int64) (UserDetail, error) {
	st, err := s.userAdmin()
	if err != nil {
		return UserDetail{}, err
	}
	u, err := s.UserByID(ctx, id)
	if err != nil {
		return UserDetail{}, err
	}
	d := UserDetail{User: u}
	now := s.now()
	// A session made while the idle time was longer or off, and unused
	// since for longer than it is now, signs in no more (Session); nor
	// one made while the TTL was longer, signed in longer ago than it is.
	var usedAfter time.Time
	if s.cfg.SessionIdle > 0 {
		usedAfter = now.Add(-s.cfg.SessionIdle - sessionTouchGap)
	}
	if d.Sessions, err = st.CountSessions(ctx, id, now, usedAfter, now.Add(-s.cfg.SessionTTL)); err != nil {
		return UserDetail{}, s.dbDown("counting sessions", err)
	}
	if d.Devices, err = s.store.AccountDevices(ctx, id, s.cfg.MaxDevices); err != nil {
		return UserDetail{}, s.dbDown("listing devices", err)
	}
	for _, lock := range locksOf(u.Email) {
		l, locked, err := st.AccountLockout(ctx, lock.key(), now)
		if err != nil {
			return UserDetail{}, s.dbDown("reading lockout", err)
		}
		switch {
		case lock.step == "":
			d.Lockout, d.Locked = l, locked
		case locked:
			d.SecondStepLocks = append(d.SecondStepLocks, l.listed())
		}
	}
	return d, nil
}

// adminDone finishes an administrator's action on an account: a store
// error becomes ErrUnavailable (ErrNoUser and ErrLastAdmin pass), and a
// success is recorded as an event of kind, by by.
func (s *Service) adminDone(what string, u User, err error, kind, by string) (User, error) {
	if errors.Is(err, ErrNoUser) || errors.Is(err, ErrLastAdmin) {
		return User{}, err
	}
	if err != nil {
		return User{}, s.dbDown(what, err)
	}
	s.record(Event{Kind: kind, Account: u.Email, UserID: u.ID, Detail: map[string]string{"by": by}})
	return u, nil
}

// DisableUser disables account id: from then on its sign-ins fail as a
// wrong password does, it is mailed nothing, and every session and known
// device it had is gone, on this replica at once and on the others within
// the session cache's second. by names who did it. Errors: ErrNoUser,
// ErrLastAdmin, ErrUnavailable.
func (s *Service) DisableUser(ctx context.Context, id int64, by string) (User, error) {
	st, err := s.userAdmin()
	if err != nil {
		return User{}, err
	}
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	u, err := st.DisableUser(ctx, id, s.now())
	s.sessionCache.purge()
	s.deviceCache.purge()
	return s.adminDone("disabling account", u, err, EventUserDisabled, by)
}

// EnableUser enables account id again; it signs in with the password it
// had. Errors: ErrNoUser, ErrUnavailable.
func (s *Service) EnableUser(ctx context.Context, id int64, by string) (User, error) {
	st, err := s.userAdmin()
	if err != nil {
		return User{}, err
	}
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	u, err := st.EnableUser(ctx, id)
	return s.adminDone("enabling account", u, err, EventUserEnabled, by)
}

// PromoteUser makes account id an administrator. Errors: ErrNoUser,
// ErrUnavailable.
func (s *Service) PromoteUser(ctx context.Context, id int64, by string) (User, error) {
	return s.setAdmin(ctx, id, true, by)
}

// DemoteUser makes account id an administrator no more. Errors:
// ErrNoUser, ErrLastAdmin, ErrUnavailable.
func (s *Service) DemoteUser(ctx context.Context, id int64, by string) (User, error) {
	return s.setAdmin(ctx, id, false, by)
}

func (s *Service) setAdmin(ctx context.Context, id int64, admin bool, by string) (User, error) {
	st, err := s.userAdmin()
	if err != nil {
		return User{}, err
	}
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	u, err := st.SetUserAdmin(ctx, id, admin)
	// Sessions read the role from the account, but the proxies' cache
	// keeps it for a moment.
	s.sessionCache.purge()
	kind := EventUserPromoted
	if !admin {
		kind = EventUserDemoted
	}
	return s.adminDone("changing role", u, err, kind, by)
}

// DeleteUser deletes account id with its sessions, devices and links.
// Its security events stay, under its email, and so do its lockout
// records. Errors: ErrNoUser, ErrLastAdmin, ErrUnavailable.
func (s *Service) DeleteUser(ctx context.Context, id int64, by string) (User, error) {
	st, err := s.userAdmin()
	if err != nil {
		return User{}, err
	}
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	u, err := st.DeleteUser(ctx, id)
	s.sessionCache.purge()
	s.deviceCache.purge()
	return s.adminDone("deleting account", u, err, EventUserDeleted, by)
}

// MaxAdminLock bounds how long an administrator locks an account for.
const MaxAdminLock = 30 * 24 * time.Hour

// LockUser locks account id out for d (1 minute to MaxAdminLock) as
// repeated failures would: browsers that are not its known devices are
// refused until then or until it is unlocked (Unlock); its known devices
// still sign in, as under any lockout. A lock already longer is kept,
// and recorded as the lock's end.
// Once the limits hold it the lock is recorded as by's act, even if the
// lockout log cannot take its row. Errors: ErrNoUser, ErrInvalidRequest,
// ErrUnavailable.
func (s *Service) LockUser(ctx context.Context, id int64, d time.Duration, by string) (User, error) {
	if d < time.Minute || d > MaxAdminLock {
		return User{}, fmt.Errorf("%w: lock of %s", ErrInvalidRequest, d)
	}
	u, err := s.UserByID(ctx, id)
	if err != nil {
		return User{}, err
	}
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	now := s.now()
	until := now.Add(d)
	if err := s.limits.Hold(ctx, ratelimit.HeldLock{Name: RuleLoginAccount, ID: u.Email, Since: now, Until: until, Level: 1}); err != nil {
		return User{}, unavailable("locking account", err)
	}
	// A lock in force that ends later is kept, not shortened: recorded is
	// its end, so that the account's page and the lock's end say when the
	// account is free. Read from the limits (its lock alone, admitting
	// nothing); if they cannot say, the end asked for stands.
	if d, err := s.limits.AllowAll(ctx, ratelimit.Rule{Name: RuleLoginAccount, ID: u.Email, Lockable: true}); err == nil && !d.Allowed {
		if end := now.Add(d.RetryAfter); end.After(until) {
			until = end
		}
	}
	// The lock is in force from here: a log that refuses its row (or an
	// account deleted meanwhile) is logged, as for a lock by failures, and
	// the administrator's act is recorded all the same.
	if err := s.store.RecordLockout(ctx, Lockout{Account: u.Email, UserID: u.ID, Level: 1, LockedAt: now, LockedUntil: until}); err != nil {
		s.metrics.dbErrors.Inc()
		s.log.ErrorContext(ctx, "recording lockout", "err", err)
	}
	s.record(Event{Kind: EventLockout, Account: u.Email, UserID: u.ID,
		Detail: map[string]string{"by": by, "until": until.UTC().Format(time.RFC3339)}})
	return u, nil
}

// SendResetLink mails account id a password-reset link, as if its owner
// had asked for one: through the same queue, limits and mail. by names
// who did it. Errors: ErrNoUser, ErrUserDisabled, ErrUnavailable.
func (s *Service) SendResetLink(ctx context.Context, id int64, by string) (User, error) {
	u, err := s.UserByID(ctx, id)
	if err != nil {
		return User{}, err
	}
	if u.Disabled() {
		return User{}, ErrUserDisabled
	}
	s.record(Event{Kind: EventResetRequested, Account: u.Email, UserID: u.ID, Detail: map[string]string{"by": by}})
	s.queueLink(linkJob{email: u.Email, at: s.now()})
	return u, nil
}
