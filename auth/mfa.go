package auth

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Second factors. An account may enrol factors of a kind (FactorTOTP now,
// FactorWebAuthn later): a factor counts once confirmed, and then a
// sign-in whose password was right gets a second step (mfa_signin.go)
// instead of a session, unless it comes from a known device its owner
// asked to remember. Nothing before the right password looks factors up,
// so no answer to a wrong password or an unknown account says whether an
// account has any.
//
// The second step is limited on its own (RuleMFAAccount, RuleMFANetwork):
// its failures never count towards the password's lockout, and the
// password's never towards it, so an attacker who lacks the password
// cannot lock the owner out of the second step, nor one who has it out of
// the first (keycloak#46164).

// FactorKind is what a second factor is.
type FactorKind string

// The kinds of second factors; the database checks the same list.
const (
	// FactorTOTP is an authenticator app's time-based code (RFC 6238).
	FactorTOTP FactorKind = "totp"
	// FactorWebAuthn is a passkey or security key.
	FactorWebAuthn FactorKind = "webauthn"
)

// Factor is one second factor of an account, as stored.
type Factor struct {
	ID     int64
	UserID int64
	Kind   FactorKind
	// Name is what the owner calls it ("Phone"); 1 to 64 characters.
	Name string
	// Secret is a TOTP factor's shared key, sealed (sealSecret); it never
	// leaves the package.
	Secret []byte
	// CreatedAt is when enrolment began; ConfirmedAt when it was
	// confirmed (zero: not yet, and the factor does not count).
	CreatedAt, ConfirmedAt, LastUsedAt time.Time
	// LastStep is the last TOTP time step a code was accepted for.
	LastStep int64
}

// FactorInfo is a confirmed factor as its owner sees it listed.
type FactorInfo struct {
	ID                               int64
	Kind                             FactorKind
	Name                             string
	CreatedAt, ConfirmedAt, LastUsed time.Time
}

// MFAChallenge is the stored second step of a sign-in.
type MFAChallenge struct {
	// TokenHash is the SHA-256 of the mfa_token; BindingHash the SHA-256
	// of the cookie the browser got with it.
	TokenHash, BindingHash []byte
	UserID                 int64
	// Email is the account's, as read back with the step.
	Email string
	// PasswordHash is the hash the first step verified: the second step
	// signs in only while it is still the account's.
	PasswordHash string
	// MustChange: the password was breached, and the session may only
	// change it (breached.go).
	MustChange           bool
	CreatedAt, ExpiresAt time.Time
	// SignOuts is the account's User.SignOuts the first step read: the
	// step is stored only while it is still the account's, so that one
	// begun before a sign-out everywhere is not stored after it.
	SignOuts int64
}

// FactorStore keeps second factors, recovery codes, second steps and the
// browsers that skip them. Package postgres implements it.
type FactorStore interface {
	// HasFactors reports whether the account has a confirmed factor.
	HasFactors(ctx context.Context, userID int64) (bool, error)
	// Factors lists the account's factors, confirmed or not, oldest first.
	Factors(ctx context.Context, userID int64) ([]Factor, error)
	// AddFactor stores f unconfirmed and returns its id, forgetting the
	// account's other unconfirmed factors of its kind; ErrNoUser if the
	// account is gone.
	AddFactor(ctx context.Context, f Factor) (int64, error)
	// ConfirmFactor confirms the account's unconfirmed factor id, with
	// step as its last TOTP step, at once with its recovery codes: when
	// recovery is not nil, those hashes become the account's codes if it
	// has no other confirmed factor, and codes says whether they did
	// (another first factor confirmed meanwhile keeps the codes its page
	// showed); ErrNoFactor if the account has no such unconfirmed factor.
	//
	// It is confirmed only while v is still the account's
	// (ErrPasswordChanged otherwise): a factor set up with a password
	// that was replaced meanwhile, or by a session signed out everywhere,
	// is no factor of the account.
	ConfirmFactor(ctx context.Context, userID, id, step int64, recovery [][]byte, at time.Time, v Verified) (codes bool, err error)
	// UseTOTPStep records step as the last one of the confirmed factor id
	// if it is later than the last, and reports whether it was: a code
	// works once, however many requests race with it.
	UseTOTPStep(ctx context.Context, id, step int64, at time.Time) (bool, error)
	// UseRecoveryCode spends the account's unused recovery code with hash
	// and reports whether there was one: a code works once, however many
	// requests race with it.
	UseRecoveryCode(ctx context.Context, userID int64, hash []byte, at time.Time) (bool, error)
	// UseRecoveryCodeForStep spends the account's unused recovery code
	// with hash together with the live second step of tokenHash for the
	// browser bindingHash (ConsumeMFAChallenge), at once or not at all:
	// ErrInvalidToken, nothing spent, if the step is gone (another answer
	// finished it); false, the step kept, if there is no such code.
	UseRecoveryCodeForStep(ctx context.Context, userID int64, hash []byte, tokenHash, bindingHash []byte, at time.Time) (MFAChallenge, bool, error)
	// RecoveryCodesLeft counts the account's unused recovery codes.
	RecoveryCodesLeft(ctx context.Context, userID int64) (int, error)
	// ReplaceRecoveryCodes replaces every recovery code of the account,
	// used or not, with those hashes, at once, and forgets its remembered
	// browsers; ErrNoFactor if the account has no confirmed factor. Of
	// replacements at once, one set stays.
	// Only while v is still the account's (ErrPasswordChanged otherwise),
	// as ConfirmFactor.
	ReplaceRecoveryCodes(ctx context.Context, userID int64, recovery [][]byte, at time.Time, v Verified) error
	// RemoveFactors removes the account's factor id, or every factor when
	// id is 0, and returns how many confirmed ones it removed, and
	// forgets the account's remembered browsers. Once none is left, the
	// account's recovery codes and second steps go too, at once. ErrNoFactor if id names none of the
	// account's factors. With v (the owner's removal, not an
	// administrator's), only while v is still the account's
	// (ErrPasswordChanged otherwise), as ConfirmFactor.
	RemoveFactors(ctx context.Context, userID, id int64, v *Verified) (int64, error)

	// AddMFAChallenge stores a second step, and forgets the account's
	// expired ones, only while c.SignOuts is still the account's
	// User.SignOuts (ErrPasswordChanged otherwise, and when the account
	// is gone or disabled).
	AddMFAChallenge(ctx context.Context, c MFAChallenge) error
	// MFAChallenge returns the second step stored under tokenHash for the
	// browser bindingHash that expires after now; ErrInvalidToken if none.
	MFAChallenge(ctx context.Context, tokenHash, bindingHash []byte, now time.Time) (MFAChallenge, error)
	// ConsumeMFAChallenge deletes that second step and returns it;
	// ErrInvalidToken if there is none (another request took it).
	ConsumeMFAChallenge(ctx context.Context, tokenHash, bindingHash []byte, now time.Time) (MFAChallenge, error)
	// SpendHeldMFA stores c as the mark that a held second step was
	// spent (mfa_held.go), until it expires, and reports whether it was
	// not already: a held step signs in once, however many right codes
	// race with it.
	SpendHeldMFA(ctx context.Context, c MFAChallenge) (bool, error)

	// RememberMFA lets the known device nonceHash of the account skip the
	// second step until until, while the account has a confirmed factor
	// (none is remembered without one) and its password and sign-outs are
	// still v's: a new password or a sign-out everywhere committed since
	// the sign-in remembers nothing.
	RememberMFA(ctx context.Context, userID int64, nonceHash []byte, until time.Time, v Verified) error
	// MFARemembered reports whether the known device nonceHash skips the
	// second step at now: it is remembered past now, but not past
	// latest.
	MFARemembered(ctx context.Context, nonceHash []byte, now, latest time.Time) (bool, error)

	// NewestTOTPFactor returns the confirmed TOTP factor stored last
	// whose Secret's first byte, its format (sealSecret), is format;
	// ErrNoFactor if none is.
	NewestTOTPFactor(ctx context.Context, format byte) (Factor, error)
}

// MaxFactors bounds the confirmed second factors of an account, passkeys
// and authenticator apps together: its passkeys are listed in every second
// step's options and every registration's exclusions, and stored one row
// each.
const MaxFactors = 20

// Errors of second factors.
var (
	// ErrMFARequired: the password was right and the account has a
	// factor; LoginResult.MFA holds the second step to finish.
	ErrMFARequired = errors.New("auth: second factor required")
	// ErrInvalidCode: a second-factor or recovery code that is wrong, was
	// used already, or a TOTP code of a step already used.
	ErrInvalidCode = errors.New("auth: invalid code")
	// ErrNoFactor: the account has no such factor.
	ErrNoFactor = errors.New("auth: no such factor")
	// ErrTooManyFactors: the account has MaxFactors confirmed factors
	// already.
	ErrTooManyFactors = errors.New("auth: the account has as many second factors as it may")
	// ErrFactorRequired: an administrator without a factor, where
	// XCLOAK_ADMIN_MFA=required, must enrol one first.
	ErrFactorRequired = errors.New("auth: administrators must enrol a second factor")
)

// Second-factor events. Detail never holds a code or a secret.
const (
	// EventMFARequired: the right password of an account with a factor; a
	// second step was issued.
	EventMFARequired = "mfa_required"
	// EventMFAFailed: a wrong code at the second step; Detail "reused" is
	// "true" for a TOTP code of a step already used.
	EventMFAFailed = "mfa_failed"
	// EventMFARejected: a second step refused by its limits; Rule says
	// which.
	EventMFARejected = "mfa_rejected"
	// EventFactorAdded and EventFactorRemoved: an account's factor
	// confirmed or removed; Detail "kind", and "by" for an administrator.
	EventFactorAdded   = "factor_added"
	EventFactorRemoved = "factor_removed"
	// EventRecoveryCodeUsed: a recovery code finished a second step;
	// Detail "left" is how many are left.
	EventRecoveryCodeUsed = "recovery_code_used"
	// EventRecoveryCodesRegenerated: the owner replaced the account's
	// recovery codes with new ones, the password typed again.
	EventRecoveryCodesRegenerated = "recovery_codes_regenerated"
)

// AdminMFA says whether administrators must have a second factor.
type AdminMFA string

// The settings of XCLOAK_ADMIN_MFA.
const (
	// AdminMFARequired: an administrator without a factor is sent to enrol
	// one before reaching the dashboard.
	AdminMFARequired AdminMFA = "required"
	// AdminMFAOptional: administrators choose, like everyone.
	AdminMFAOptional AdminMFA = "optional"
)

// ParseAdminMFA parses required or optional.
func ParseAdminMFA(s string) (AdminMFA, error) {
	switch m := AdminMFA(s); m {
	case AdminMFARequired, AdminMFAOptional:
		return m, nil
	}
	return "", fmt.Errorf("%q is not required or optional", s)
}

// MFAConfig shapes second factors.
type MFAConfig struct {
	// Key, when set (32 bytes), seals TOTP secrets at rest with
	// AES-256-GCM (totp.go); without it they are stored as they are.
	Key []byte
	// Issuer names the service in authenticator apps.
	Issuer string
	// ChallengeTTL is how long a second step may be finished.
	ChallengeTTL time.Duration
	// RememberFor is how long "remember this browser" skips the second
	// step on a known device; zero offers no such choice.
	RememberFor time.Duration
	// Admins says whether administrators must have a factor; "" means
	// required.
	Admins AdminMFA
}

// Defaults of MFAConfig.
const (
	DefaultMFAChallengeTTL = 5 * time.Minute
	DefaultMFARememberFor  = 30 * 24 * time.Hour
	// MaxMFARememberFor bounds "remember this browser": a browser signed
	// in to at least that often would otherwise never be asked for a
	// code again, and 7200h typed for 720h would be granted.
	MaxMFARememberFor = 90 * 24 * time.Hour
)

// DefaultMFAConfig returns the defaults: no key, five minutes to finish a
// second step, browsers remembered for 30 days, administrators required
// to have a factor.
func DefaultMFAConfig() MFAConfig {
	return MFAConfig{Issuer: "XCloak", ChallengeTTL: DefaultMFAChallengeTTL, RememberFor: DefaultMFARememberFor, Admins: AdminMFARequired}
}

// checkMFA checks the second factors' settings and fills in defaults.
func checkMFA(c *MFAConfig) error {
	if c.Key != nil && len(c.Key) != 32 {
		return errors.New("second factors: the key must be 32 bytes")
	}
	if c.Issuer == "" {
		c.Issuer = "XCloak"
	}
	if c.ChallengeTTL <= 0 {
		return errors.New("second factors: the second step's lifetime must be positive")
	}
	if c.RememberFor < 0 || c.RememberFor > MaxMFARememberFor {
		return errors.New("second factors: remembering a browser lasts from 0 to 90 days")
	}
	if c.Admins == "" {
		c.Admins = AdminMFARequired
	}
	if _, err := ParseAdminMFA(string(c.Admins)); err != nil {
		return fmt.Errorf("second factors: administrators: %w", err)
	}
	return nil
}

// RememberFor is how long "remember this browser" lasts; zero when the
// second step offers no such choice.
func (s *Service) RememberFor() time.Duration { return s.cfg.MFA.RememberFor }

// factorStore returns the store of second factors, ErrUnavailable without
// one.
func (s *Service) factorStore() (FactorStore, error) {
	if s.factors == nil {
		return nil, fmt.Errorf("%w: no store of second factors", ErrUnavailable)
	}
	return s.factors, nil
}

// hasFactors reports whether the account has a confirmed factor; false
// for a service without a store of them.
func (s *Service) hasFactors(ctx context.Context, userID int64) (bool, error) {
	if s.factors == nil {
		return false, nil
	}
	ok, err := s.factors.HasFactors(ctx, userID)
	if err != nil {
		return false, s.dbDown("reading second factors", err)
	}
	return ok, nil
}

// AdminNeedsFactor reports whether the administrator of sess must enrol a
// factor before reaching the administrators' pages (XCLOAK_ADMIN_MFA).
// Not for other sessions: false.
func (s *Service) AdminNeedsFactor(ctx context.Context, sess Session) (bool, error) {
	// A service without a store of factors could never let one enrol.
	if !sess.IsAdmin || s.cfg.MFA.Admins != AdminMFARequired || s.factors == nil {
		return false, nil
	}
	has, err := s.hasFactors(ctx, sess.UserID)
	if err != nil {
		return false, err
	}
	return !has, nil
}
