package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Enrolling and removing factors. Both need the password again, checked
// as a sign-in checks it (the same limits, lockout and hashing, a wrong
// one counted as a failed sign-in), so that a session left open on a
// shared computer can neither add a factor that locks the owner out nor
// remove one. Each is a security event and is mailed to the owner.

// FactorChange is a signed-in owner's proof for adding or removing a
// factor.
type FactorChange struct {
	// Session is the token of the session the change is made from.
	Session string
	// Password is the account's password, typed again.
	Password string
	Client   Client
	// DeviceCookie is the value of the account's device cookie, if the
	// browser sent one.
	DeviceCookie string
}

// TOTPEnrolment is a TOTP factor being enrolled: its otpauth:// URL,
// which the page shows as a QR code, and its secret in base32 for apps
// that take it typed.
type TOTPEnrolment struct {
	ID     int64
	URL    string
	Secret string
}

// defaultTOTPName names a TOTP factor in the owner's list.
const defaultTOTPName = "Authenticator app"

// BeginTOTP draws a TOTP secret for the account of sess and stores it
// unconfirmed, forgetting any other unconfirmed one: it counts once
// ConfirmTOTP has seen a first code of it. An account with MaxFactors
// factors begins none. A write and a key drawn each time, it is counted
// by the account's limit for client c (RuleAccountIP), as the owner's
// other acts are. Errors: *LimitedError, ErrTooManyFactors, ErrNoSession,
// ErrUnavailable.
func (s *Service) BeginTOTP(ctx context.Context, sess Session, c Client) (TOTPEnrolment, error) {
	fs, err := s.factorStore()
	if err != nil {
		return TOTPEnrolment{}, err
	}
	if err := s.checkAccountLimit(ctx, sess, c); err != nil {
		return TOTPEnrolment{}, err
	}
	if err := s.roomForFactor(ctx, fs, sess.UserID); err != nil {
		return TOTPEnrolment{}, err
	}
	secret, url, err := newTOTPKey(s.cfg.MFA.Issuer, sess.Email)
	if err != nil {
		return TOTPEnrolment{}, fmt.Errorf("%w: drawing TOTP key: %w", ErrUnavailable, err)
	}
	id, err := fs.AddFactor(ctx, Factor{UserID: sess.UserID, Kind: FactorTOTP, Name: defaultTOTPName,
		Secret: sealSecret(s.cfg.MFA.Key, sess.UserID, secret), CreatedAt: s.now()})
	if err != nil {
		return TOTPEnrolment{}, s.ownerDown("storing TOTP factor", err)
	}
	return TOTPEnrolment{ID: id, URL: url, Secret: b32.EncodeToString(secret)}, nil
}

// ConfirmTOTP confirms the account's unconfirmed TOTP factor id with a
// first code of it and the password. With the account's first factor come
// RecoveryCodes recovery codes, returned to be shown once (nil for a
// further factor: the account keeps its codes). The code's step counts as
// used. Errors: ErrNoSession, ErrInvalidRequest, *LimitedError,
// ErrInvalidCredentials, ErrNoFactor, ErrInvalidCode, ErrTooManyFactors, ErrUnavailable,
// ErrHasherBusy.
func (s *Service) ConfirmTOTP(ctx context.Context, ch FactorChange, id int64, code string) (recovery []string, err error) {
	fs, err := s.factorStore()
	if err != nil {
		return nil, err
	}
	user, err := s.reauthenticate(ctx, ch)
	if err != nil {
		return nil, err
	}
	factors, err := fs.Factors(ctx, user.ID)
	if err != nil {
		return nil, s.dbDown("reading second factors", err)
	}
	var pending *Factor
	for i, f := range factors {
		if f.ConfirmedAt.IsZero() && f.ID == id && f.Kind == FactorTOTP {
			pending = &factors[i]
		}
	}
	if pending == nil {
		return nil, ErrNoFactor
	}
	secret, err := openSecret(s.cfg.MFA.Key, user.ID, pending.Secret)
	if err != nil {
		return nil, fmt.Errorf("%w: reading TOTP factor: %w", ErrUnavailable, err)
	}
	// Read as the second step reads it (checkCode): as an app shows it
	// ("123 456"), or pasted with spaces around it.
	code = strings.ReplaceAll(strings.TrimSpace(code), " ", "")
	now := s.now()
	step, ok := matchTOTP(secret, code, now)
	if !isTOTPCode(code) || !ok {
		return nil, ErrInvalidCode
	}
	// Drawn whatever the account held when this began: the store writes
	// them only if the factor is its first once the account's row is
	// locked, which a removal of the last one in between makes it.
	recovery, hashes := newRecoveryCodes(RecoveryCodes)
	// Stored whether or not its client waits: a client that hangs up as
	// it commits must not leave it done without its event and its
	// owner's notice.
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	codes, err := fs.ConfirmFactor(ctx, user.ID, id, step, hashes, now, verifiedOf(user))
	switch {
	case errors.Is(err, ErrNoFactor), errors.Is(err, ErrTooManyFactors):
		return nil, err
	case errors.Is(err, ErrPasswordChanged):
		// The session ended with the new password or the sign-out.
		return nil, ErrNoSession
	case err != nil:
		return nil, s.dbDown("confirming TOTP factor", err)
	}
	if !codes {
		// Another first factor came first: its codes are the account's.
		recovery = nil
	}
	source := ch.Client.Source()
	s.record(Event{Kind: EventFactorAdded, Account: user.Email, UserID: user.ID, Source: source,
		Detail: map[string]string{"kind": string(FactorTOTP)}})
	s.notifyFactor(user.Email, source, &factorNotice{added: true, kind: FactorTOTP})
	return recovery, nil
}

// roomForFactor returns ErrTooManyFactors if the account has MaxFactors
// confirmed factors: checked before a factor is begun, so that its owner
// is told before the authenticator is set up; the store decides again as
// it confirms one.
func (s *Service) roomForFactor(ctx context.Context, fs FactorStore, userID int64) error {
	factors, err := fs.Factors(ctx, userID)
	if err != nil {
		return s.dbDown("reading second factors", err)
	}
	n := 0
	for _, f := range factors {
		if !f.ConfirmedAt.IsZero() {
			n++
		}
	}
	if n >= MaxFactors {
		return ErrTooManyFactors
	}
	return nil
}

// RemoveFactor removes the account's confirmed factor id, with the
// password, and forgets the account's remembered browsers; removing the
// last removes the recovery codes too. Errors:
// ErrNoSession, ErrInvalidRequest, *LimitedError, ErrInvalidCredentials,
// ErrNoFactor, ErrUnavailable, ErrHasherBusy.
func (s *Service) RemoveFactor(ctx context.Context, ch FactorChange, id int64) error {
	fs, err := s.factorStore()
	if err != nil {
		return err
	}
	user, err := s.reauthenticate(ctx, ch)
	if err != nil {
		return err
	}
	if id < 1 {
		return ErrNoFactor
	}
	// Stored whether or not its client waits: a client that hangs up as
	// it commits must not leave it done without its event and its
	// owner's notice.
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	v := verifiedOf(user)
	n, err := fs.RemoveFactors(ctx, user.ID, id, &v)
	switch {
	case errors.Is(err, ErrNoFactor):
		return err
	case errors.Is(err, ErrPasswordChanged):
		// The session ended with the new password or the sign-out.
		return ErrNoSession
	case err != nil:
		return s.dbDown("removing factor", err)
	}
	if n > 0 {
		source := ch.Client.Source()
		s.record(Event{Kind: EventFactorRemoved, Account: user.Email, UserID: user.ID, Source: source})
		s.notifyFactor(user.Email, source, &factorNotice{})
	}
	return nil
}

// RegenerateRecoveryCodes replaces every recovery code of the account,
// used or not, with RecoveryCodes new ones, returned to be shown once,
// with the password typed again: for an owner who used or mislaid the
// old ones. The old ones stop working at once, and the account's
// remembered browsers are asked for the second step again. Errors: ErrNoSession,
// ErrInvalidRequest, *LimitedError, ErrInvalidCredentials, ErrNoFactor (the
// account has no factor, so no codes), ErrUnavailable, ErrHasherBusy.
func (s *Service) RegenerateRecoveryCodes(ctx context.Context, ch FactorChange) ([]string, error) {
	fs, err := s.factorStore()
	if err != nil {
		return nil, err
	}
	user, err := s.reauthenticate(ctx, ch)
	if err != nil {
		return nil, err
	}
	// Stored whether or not its client waits: a client that hangs up as
	// it commits must not leave it done without its event and its
	// owner's notice.
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	codes, hashes := newRecoveryCodes(RecoveryCodes)
	switch err := fs.ReplaceRecoveryCodes(ctx, user.ID, hashes, s.now(), verifiedOf(user)); {
	case errors.Is(err, ErrNoFactor):
		return nil, err
	case errors.Is(err, ErrPasswordChanged):
		// The session ended with the new password or the sign-out.
		return nil, ErrNoSession
	case err != nil:
		return nil, s.dbDown("replacing recovery codes", err)
	}
	source := ch.Client.Source()
	s.record(Event{Kind: EventRecoveryCodesRegenerated, Account: user.Email, UserID: user.ID, Source: source})
	s.notifyFactor(user.Email, source, &factorNotice{recovery: true})
	return codes, nil
}

// RemoveFactors removes every factor of the account with email, its
// recovery codes and remembered browsers, for the administrator by: the
// owner who lost them signs in with the password alone again. It returns
// how many factors it removed; the event names by, and the owner is
// mailed. Errors: ErrInvalidRequest, ErrNoUser, ErrUnavailable.
func (s *Service) RemoveFactors(ctx context.Context, by, email string) (int64, error) {
	fs, err := s.factorStore()
	if err != nil {
		return 0, err
	}
	email, err = NormaliseEmail(email)
	if err != nil {
		return 0, ErrInvalidRequest
	}
	user, err := s.UserByEmail(ctx, email)
	if err != nil {
		return 0, err
	}
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	n, err := fs.RemoveFactors(ctx, user.ID, 0, nil)
	if err != nil {
		return 0, s.dbDown("removing factors", err)
	}
	if n > 0 {
		s.record(Event{Kind: EventFactorRemoved, Account: user.Email, UserID: user.ID,
			Detail: map[string]string{"by": by, "count": fmt.Sprint(n)}})
		s.notifyFactor(user.Email, "", &factorNotice{by: by})
	}
	return n, nil
}

// AccountFactors lists the confirmed factors of the account of sess and
// counts its unused recovery codes. Errors: ErrUnavailable.
func (s *Service) AccountFactors(ctx context.Context, sess Session) (factors []FactorInfo, recoveryLeft int, err error) {
	return s.UserFactors(ctx, sess.UserID)
}

// UserFactors lists the confirmed factors of the account userID and
// counts its unused recovery codes, for its owner or an administrator.
// Errors: ErrUnavailable.
func (s *Service) UserFactors(ctx context.Context, userID int64) (factors []FactorInfo, recoveryLeft int, err error) {
	fs, err := s.factorStore()
	if err != nil {
		return nil, 0, err
	}
	all, err := fs.Factors(ctx, userID)
	if err != nil {
		return nil, 0, s.dbDown("reading second factors", err)
	}
	for _, f := range all {
		if !f.ConfirmedAt.IsZero() {
			factors = append(factors, FactorInfo{ID: f.ID, Kind: f.Kind, Name: f.Name, CreatedAt: f.CreatedAt,
				ConfirmedAt: f.ConfirmedAt, LastUsed: f.LastUsedAt})
		}
	}
	if len(factors) > 0 {
		if recoveryLeft, err = fs.RecoveryCodesLeft(ctx, userID); err != nil {
			return nil, 0, s.dbDown("counting recovery codes", err)
		}
	}
	return factors, recoveryLeft, nil
}

// reauthenticate checks the session and the password typed again
// (checkPasswordAgain), and returns the account.
func (s *Service) reauthenticate(ctx context.Context, ch FactorChange) (User, error) {
	sess, err := s.Session(ctx, ch.Session)
	if err != nil {
		return User{}, err
	}
	user, _, err := s.checkPasswordAgain(ctx, sess, ch.Password, ch.Client, ch.DeviceCookie)
	return user, err
}

// factorNotice is the mail job of a factor added or removed.
type factorNotice struct {
	added bool
	kind  FactorKind
	// by is the administrator who removed the account's factors, "" for
	// the owner.
	by string
	// recovery: the owner regenerated the account's recovery codes.
	recovery bool
}

// notifyFactor queues the mail that tells the owner of email that a
// factor was added or removed, or recovery codes regenerated. It is always
// sent: a factor added by someone else locks the owner out, one removed
// weakens the account, and new codes in other hands let them past the
// second step.
func (s *Service) notifyFactor(email, source string, n *factorNotice) {
	s.queueLink(linkJob{email: email, source: source, at: s.now(), factor: n})
}

// factorMail stores a reset token for user and returns the mail of a
// factor added or removed, with its link.
func (s *Service) factorMail(ctx context.Context, user User, job linkJob) (Message, error) {
	link, err := s.resetURL(ctx, user)
	if err != nil {
		return Message{}, err
	}
	n := job.factor
	what := "A second factor (" + factorKindText(n.kind) + ") was added to"
	subject := "A second factor was added to your XCloak account"
	switch {
	case n.recovery:
		what = "New recovery codes were made, and the old ones stopped working, for"
		subject = "New recovery codes for your XCloak account"
	case !n.added && n.by != "":
		what = "An administrator removed every second factor and recovery code of"
		subject = "Your XCloak second factors were removed"
	case !n.added:
		what = "A second factor was removed from"
		subject = "A second factor was removed from your XCloak account"
	}
	return Message{
		To:      user.Email,
		Subject: subject,
		Body: fmt.Sprintf("%s the XCloak account for %s at %s.\n\n"+
			"If this wasn't you, someone else knows your password and has signed in: choose a new one "+
			"with this link within %s. It works once.\n\n%s\n\n"+
			"If it was you, there is nothing to do.\n",
			what, user.Email, job.at.UTC().Format(time.RFC1123), LinkLife(s.cfg.ResetTTL), link),
	}, nil
}

// PendingTOTP returns the enrolment of the account's unconfirmed TOTP
// factor id again, for the page to show once more after a wrong code.
// Errors: ErrNoFactor, ErrUnavailable.
func (s *Service) PendingTOTP(ctx context.Context, sess Session, id int64) (TOTPEnrolment, error) {
	fs, err := s.factorStore()
	if err != nil {
		return TOTPEnrolment{}, err
	}
	factors, err := fs.Factors(ctx, sess.UserID)
	if err != nil {
		return TOTPEnrolment{}, s.dbDown("reading second factors", err)
	}
	for _, f := range factors {
		if f.ID != id || f.Kind != FactorTOTP || !f.ConfirmedAt.IsZero() {
			continue
		}
		secret, err := openSecret(s.cfg.MFA.Key, sess.UserID, f.Secret)
		if err != nil {
			return TOTPEnrolment{}, fmt.Errorf("%w: reading TOTP factor: %w", ErrUnavailable, err)
		}
		url, err := totpURL(s.cfg.MFA.Issuer, sess.Email, secret)
		if err != nil {
			return TOTPEnrolment{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return TOTPEnrolment{ID: id, URL: url, Secret: b32.EncodeToString(secret)}, nil
	}
	return TOTPEnrolment{}, ErrNoFactor
}
