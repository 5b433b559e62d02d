package auth

import (
	"errors"
	"fmt"
	"time"
)

// Errors the service returns; the web layer maps each to one status code.
var (
	// ErrInvalidRequest: malformed input (bad email, empty or oversize
	// password). Nothing was counted or checked.
	ErrInvalidRequest = errors.New("auth: invalid request")
	// ErrInvalidCredentials: unknown account or wrong password; the two
	// are indistinguishable by design.
	ErrInvalidCredentials = errors.New("auth: invalid credentials")
	// ErrLimited: a rate limit or a lockout rejected the request; errors.As
	// a *LimitedError for when to retry.
	ErrLimited = errors.New("auth: too many attempts")
	// ErrUnavailable: a backend (Redis, Postgres, the hashing pool) could
	// not serve the request. Nothing half-done was kept.
	ErrUnavailable = errors.New("auth: unavailable")
	// ErrInvalidToken: a reset token that is malformed, unknown, used or
	// expired.
	ErrInvalidToken = errors.New("auth: invalid or expired token")
	// ErrWeakPassword: a new password that breaks the password rules.
	ErrWeakPassword = errors.New("auth: password does not meet the rules")
	// ErrSamePassword: a password change to the password it replaces.
	ErrSamePassword = errors.New("auth: new password is the current one")
	// ErrNoSession: no valid session for the token.
	ErrNoSession = errors.New("auth: no session")
	// ErrUserExists: an account with that email exists already.
	ErrUserExists = errors.New("auth: user exists")
	// ErrNoUser: no account with that email.
	ErrNoUser = errors.New("auth: no such user")
	// ErrNotListed: no session or known device of the caller's account has
	// that public id; another account's and an unknown one are alike.
	ErrNotListed = errors.New("auth: no such session or device of the account")
	// ErrVerificationRequired: a sign-in from a browser that is not a
	// known device was held for new-device verification. It is the answer
	// to the right password, a wrong one and an unknown account alike;
	// only when the password was right is a link mailed to the account.
	ErrVerificationRequired = errors.New("auth: sign-in must be finished from a mailed link")
)

// LimitedError is ErrLimited with the time after which a retry can succeed.
// A lockout and a rate limit produce the same error, so that neither
// reveals whether an account exists.
type LimitedError struct {
	// RetryAfter is how long the client should wait; never zero.
	RetryAfter time.Duration
	// admitted: the limits admitted and counted the request, and what
	// came after refused it (a place towards a lock it waited for in
	// vain, waitForPlaces).
	admitted bool
}

func (e *LimitedError) Error() string {
	return fmt.Sprintf("auth: too many attempts; retry after %s", e.RetryAfter)
}

// Is makes errors.Is(err, ErrLimited) true.
func (e *LimitedError) Is(target error) bool { return target == ErrLimited }

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up.
func (e *LimitedError) RetryAfterSeconds() int {
	return max(1, int((e.RetryAfter+time.Second-1)/time.Second))
}

// unavailable wraps a backend failure so that callers see ErrUnavailable
// and logs see the cause.
func unavailable(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
}
