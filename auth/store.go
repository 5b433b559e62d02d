package auth

import (
	"context"
	"errors"
	"time"
)

// The storage the flows need, declared here, where it is used, and shaped
// by what the flows do rather than by tables: whatever must happen at once
// (a password replaced with every session and device it gave away) is one
// method, which an implementation runs as one transaction. Package postgres
// implements them all.
//
// Secrets never reach a store: sessions, reset and unlock tokens and
// device nonces are handed over as their SHA-256, so a copy of the
// database signs no one in. Timestamps come from the service's clock.
//
// Stores return the sentinel errors below and in errors.go for the
// outcomes a flow acts on; any other error is a failure of the store,
// which the flows count and report as ErrUnavailable.

// ErrPasswordChanged is what a store returns when a write that depends on
// the password a sign-in verified finds that password replaced meanwhile,
// or the account signed out everywhere since the sign-in read it.
// The flows never return it: the sign-in is refused as
// ErrInvalidCredentials.
var ErrPasswordChanged = errors.New("auth: password changed meanwhile")

// Verified is what a change to an account checked of it: the password hash
// it verified and the account's count of sign-outs everywhere when it read
// them (User.PasswordHash, User.SignOuts). A store makes the change only
// while both are still the account's (ErrPasswordChanged otherwise).
type Verified struct {
	PasswordHash string
	SignOuts     int64
}

// verifiedOf is what a change verified of u, read with its password hash.
func verifiedOf(u User) Verified { return Verified{PasswordHash: u.PasswordHash, SignOuts: u.SignOuts} }

// Store is every kind of storage the service needs.
type Store interface {
	UserStore
	SessionStore
	DeviceStore
	ResetTokenStore
	UnlockTokenStore
	SignInTokenStore
	LockoutLog
	Sweeper
}

// UserStore keeps accounts.
type UserStore interface {
	// CreateUser adds an account with a normalised email; ErrUserExists if
	// the email is taken.
	CreateUser(ctx context.Context, email, passwordHash string, admin bool) (User, error)
	// UserByEmail returns the account with a normalised email; ErrNoUser
	// if none.
	UserByEmail(ctx context.Context, email string) (User, error)
	// RehashPassword replaces the account's hash old with hash, a new hash
	// of the same password; ErrPasswordChanged if old is no longer the
	// account's hash, so that a rehash never brings a replaced password
	// back.
	RehashPassword(ctx context.Context, userID int64, old, hash string) error
	// SetPassword replaces the password of the account with email, ends
	// every session of it and forgets its known devices and open unlock
	// and reset links, at once, and returns the account's ID; ErrNoUser if
	// there is no such account.
	SetPassword(ctx context.Context, email, hash string) (int64, error)
	// ChangePassword replaces the password of account userID, whose hash
	// must still be old (ErrPasswordChanged otherwise; ErrNoUser if the
	// account is gone), for its owner signed in with the session stored
	// under sessionHash (ErrNoSession if it is gone). At once, it ends
	// every other session of the account, moves this one to
	// newSessionHash (its old token signs in no more) and lifts its
	// MustChangePassword, and forgets the account's known devices but
	// keepDevice (nil: every one), its open unlock links and its open
	// reset links but the change notices' (AddResetToken).
	ChangePassword(ctx context.Context, userID int64, old, hash string, sessionHash, newSessionHash, keepDevice []byte) error
}

// SessionStore keeps signed-in browsers by the hash of their token.
type SessionStore interface {
	// CreateSession stores sess (its Token is not stored, its
	// MustChangePassword is) under tokenHash, only while passwordHash is
	// still the account's hash and signOuts its User.SignOuts
	// (ErrPasswordChanged otherwise): no session made with a replaced
	// password outlives the replacement, nor one made by a sign-in under
	// way the sign-out that ended every other, whichever commits first.
	CreateSession(ctx context.Context, tokenHash []byte, sess Session, passwordHash string, signOuts int64) error
	// SessionByHash returns the session stored under tokenHash that
	// expires after now; ErrNoSession if none.
	SessionByHash(ctx context.Context, tokenHash []byte, now time.Time) (Session, error)
	// LegacySessionsLive reports whether any session made before session
	// tokens were tagged expires after now.
	LegacySessionsLive(ctx context.Context, now time.Time) (bool, error)
	// DeleteSession ends the session stored under tokenHash, if any.
	DeleteSession(ctx context.Context, tokenHash []byte) error
	// SignOutEverywhere ends every session of the account with email,
	// its pending second steps and sign-in links, and forgets its known
	// devices and open unlock links, at once, adds one to its
	// User.SignOuts, and returns its id; ErrNoUser if there is no such
	// account.
	SignOutEverywhere(ctx context.Context, email string) (userID int64, err error)

	// TouchSession sets the last use of the session stored under tokenHash
	// to at, unless it was set after at minus minGap: however many
	// replicas and requests touch it, a session is written at most once
	// per minGap. The same write sets its expiry to the sooner of its end
	// (Session.EndsAt) and idleEnd, or to its end if idleEnd is zero. An
	// expired session is not touched.
	TouchSession(ctx context.Context, tokenHash []byte, at time.Time, minGap time.Duration, idleEnd time.Time) error
	// AccountSessions lists the account's sessions that expire after now,
	// the most recently used first, at most limit.
	AccountSessions(ctx context.Context, userID int64, now time.Time, limit int) ([]SessionInfo, error)
	// AccountDevices lists the account's known devices, the most recently
	// used first, at most limit.
	AccountDevices(ctx context.Context, userID int64, limit int) ([]DeviceInfo, error)
	// EndSession ends the session of account userID whose public id is
	// publicID, asked by the account's session stored under byHash;
	// ErrNotListed if the account has none such, ErrNoSession (and
	// nothing ended) if the asking session is no longer the account's,
	// ErrNoUser if the account is gone. A session that ends (a password
	// change, an ending from another browser) while its request is under
	// way ends nothing after it: the check and the ending hold the
	// account's row, as every ending of its sessions does.
	EndSession(ctx context.Context, userID int64, byHash []byte, publicID string) error
	// EndOtherSessions ends every session of account userID but the one
	// stored under keepHash, which asks, and its pending second steps and
	// sign-in links, adds one to its User.SignOuts, and returns how many
	// sessions it ended; ErrNoSession (and nothing ended) if the session
	// under keepHash is no longer the account's, ErrNoUser if the account
	// is gone.
	EndOtherSessions(ctx context.Context, userID int64, keepHash []byte) (int64, error)
	// ForgetDevice forgets the known device of account userID whose public
	// id is publicID, asked by the account's session stored under byHash;
	// ErrNotListed if the account has none such, ErrNoSession (and
	// nothing forgotten) if the asking session is no longer the
	// account's, ErrNoUser if the account is gone.
	ForgetDevice(ctx context.Context, userID int64, byHash []byte, publicID string) error
}

// DeviceStore keeps the known devices of each account by the hash of
// their nonce.
type DeviceStore interface {
	// ForgetNewDevices forgets every device first seen at or after since
	// but the verified ones, and ends the sessions created at or after
	// since of the accounts they belonged to and of the accounts also
	// names, at once; it returns the accounts whose devices it forgot.
	ForgetNewDevices(ctx context.Context, since time.Time, also []int64) ([]User, error)
	// KnownDevice reports whether nonceHash is a device of the account
	// with email last seen after seenAfter.
	KnownDevice(ctx context.Context, email string, nonceHash []byte, seenAfter time.Time) (bool, error)
	// AddDevice makes nonceHash a known device of the account, seen at,
	// verified when its sign-in proved more than the password (a second
	// factor), and forgets its least recently used devices beyond max.
	// With passwordHash set, it does so only while that is still the
	// account's hash and signOuts its User.SignOuts (ErrPasswordChanged
	// otherwise, and when the account is gone). Devices added to one
	// account at once are serialised, so that max holds.
	AddDevice(ctx context.Context, userID int64, passwordHash string, signOuts int64, nonceHash []byte, at time.Time, max int, verified bool) error
	// TouchDevice notes that the device signed in at.
	TouchDevice(ctx context.Context, nonceHash []byte, at time.Time) error
}

// ResetTokenStore keeps password reset tokens by their hash.
type ResetTokenStore interface {
	// AddResetToken stores a token for the account, usable until
	// expiresAt; ErrNoUser if the account is gone or disabled, so that a
	// link made as it is disabled is neither stored nor mailed (one stored
	// before is spent by the disabling). A change notice's (the link in
	// the notice that the password was changed) outlives later password
	// changes (ChangePassword); any other is spent by them.
	AddResetToken(ctx context.Context, tokenHash []byte, userID int64, createdAt, expiresAt time.Time, changeNotice bool) error
	// ResetTokenUser returns the account of an unused reset token that
	// expires after now; ErrInvalidToken if there is none.
	ResetTokenUser(ctx context.Context, tokenHash []byte, now time.Time) (userID int64, email string, err error)
	// ResetPassword spends an unused reset token that expires after now,
	// and every other open token of its account, and replaces the
	// account's password as SetPassword does, at once. Spending is
	// conditional, so a token works once even when confirmations race;
	// ErrInvalidToken if it cannot be spent.
	ResetPassword(ctx context.Context, tokenHash []byte, now time.Time, hash string) (userID int64, email string, err error)
}

// UnlockTokenStore keeps unlock-link tokens by their hash.
type UnlockTokenStore interface {
	// AddUnlockToken stores a token for the account, usable until
	// expiresAt; ErrNoUser if the account is gone or disabled, as
	// AddResetToken.
	AddUnlockToken(ctx context.Context, tokenHash []byte, userID int64, createdAt, expiresAt time.Time) error
	// UnlockTokenLive reports whether an unused unlock token expires
	// after now.
	UnlockTokenLive(ctx context.Context, tokenHash []byte, now time.Time) (bool, error)
	// UseUnlockToken spends an unused unlock token that expires after now
	// and makes nonceHash a verified known device of its account, as
	// AddDevice does without a password to check, at once. Spending is conditional,
	// so a token works once even when confirmations race;
	// ErrInvalidToken if it cannot be spent.
	UseUnlockToken(ctx context.Context, tokenHash []byte, now time.Time, nonceHash []byte, maxDevices int) (userID int64, email string, err error)
}

// SignInTokenStore keeps the tokens of the links that finish a sign-in
// held for new-device verification, by their hash.
type SignInTokenStore interface {
	// AddSignInToken stores a token for the account, bound to
	// passwordHash (the hash the held sign-in verified), usable until
	// expiresAt, only while passwordHash is still the account's hash and
	// signOuts its User.SignOuts (ErrPasswordChanged otherwise): a sign-in
	// signed out everywhere while it was held gets no link after it.
	// ErrNoUser if the account is gone or disabled, as AddResetToken: a
	// link made as it is disabled is neither stored nor mailed.
	AddSignInToken(ctx context.Context, tokenHash []byte, userID int64, passwordHash string, signOuts int64, createdAt, expiresAt time.Time) error
	// SignInTokenLive returns the email of the account of an unused
	// sign-in token that expires after now and whose account's password
	// hash is still the one it is bound to; "" if there is none.
	SignInTokenLive(ctx context.Context, tokenHash []byte, now time.Time) (email string, err error)
	// UseSignInToken spends an unused sign-in token that expires after
	// now and whose account's password hash is still the one it is bound
	// to, makes nonceHash a verified known device of the account, as
	// AddDevice does, and returns the account, at once. Spending is conditional, so a
	// token works once even when confirmations race; ErrInvalidToken if it
	// cannot be spent.
	UseSignInToken(ctx context.Context, tokenHash []byte, now time.Time, nonceHash []byte, maxDevices int) (User, error)
}

// LockoutLog keeps the record of account lockouts. The locks themselves
// live with the limits; the log is what the dashboard lists, what an
// administrator clears, and what the in-process limits honour while Redis
// is unreachable.
type LockoutLog interface {
	// RecordLockout adds a lockout; its ID is ignored.
	RecordLockout(ctx context.Context, l Lockout) error
	// ClearLockout marks the account's lockouts still in force at as
	// ended, by whom.
	ClearLockout(ctx context.Context, account string, at time.Time, by string) error
	// LockoutListed reports whether the log holds a lockout of account in
	// force at now.
	LockoutListed(ctx context.Context, account string, now time.Time) (bool, error)
	// ActiveLockouts lists the latest lockout of each account in force at
	// now, newest first, at most limit.
	ActiveLockouts(ctx context.Context, now time.Time, limit int) ([]Lockout, error)
	// LockoutsToHold lists the latest lockout of each account in force
	// at now, at most limit, for the in-process limits to hold while
	// Redis is unreachable, but for the second step's locks (keys that
	// begin with SecondStepLockPrefix): XCloak's own accounts' first, then
	// applications' accounts ("app NAME ACCOUNT"), each newest first, so
	// that no application's lockouts, which its key's holder may cause at
	// will, crowd out XCloak's own; and of XCloak's own, those of accounts
	// that exist (a user ID) before those of addresses that do not, which
	// anyone may lock as many of as he likes. Equal times go by the
	// newest row.
	LockoutsToHold(ctx context.Context, now time.Time, limit int) ([]Lockout, error)
	// EndLockouts marks the lockouts whose time ran out by now, and that
	// nobody ended, as ended at their LockedUntil by LockoutExpired, and
	// returns them, at most limit. A lockout is returned once, by one
	// call, however many replicas call at the same time.
	EndLockouts(ctx context.Context, now time.Time, limit int) ([]Lockout, error)
}

// Sweeper removes what no one can use any more.
type Sweeper interface {
	// Sweep removes the records of one kind older than before, in
	// bounded batches so that a backlog never holds long locks, until
	// none is left or ctx is done, and returns how many it removed.
	Sweep(ctx context.Context, kind SweepKind, before time.Time) (int64, error)
}

// SweepKind names a kind of record the janitor removes, in logs and in
// what Sweep reports.
type SweepKind string

// The kinds of records the janitor removes.
const (
	SweepSessions       SweepKind = "sessions"              // by expiry
	SweepResetTokens    SweepKind = "password_reset_tokens" // by use, else expiry
	SweepUnlockTokens   SweepKind = "unlock_tokens"         // by use, else expiry
	SweepSignInTokens   SweepKind = "sign_in_tokens"        // by use, else expiry
	SweepDevices        SweepKind = "devices"               // by last sign-in
	SweepAppDevices     SweepKind = "app_devices"           // by last sign-in
	SweepAppResets      SweepKind = "app_account_resets"    // by time
	SweepSecurityEvents SweepKind = "security_events"       // by time
	SweepMFAChallenges  SweepKind = "mfa_challenges"        // by expiry
	SweepCeremonies     SweepKind = "webauthn_ceremonies"   // by expiry
	SweepEventBatches   SweepKind = "event_batches"         // by time
	SweepLockouts       SweepKind = "lockouts"              // by end, once ended
)
