package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// User is an account.
type User struct {
	ID           int64
	Email        string
	PasswordHash string
	IsAdmin      bool
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// DisabledAt is when an administrator disabled the account; zero while
	// it is enabled (useradmin.go).
	DisabledAt time.Time
	// SignOuts counts the times every browser of the account was signed
	// out (SignOutEverywhere, EndOtherSessions): a sign-in makes its
	// session and device only while it is still what the sign-in read.
	SignOuts int64
}

// Disabled reports whether an administrator disabled the account.
func (u User) Disabled() bool { return !u.DisabledAt.IsZero() }

// Password rules: NIST SP 800-63B asks for at least 8 characters and no
// composition rules; the upper bound keeps hashing cheap to refuse.
const MinPasswordRunes = 8

// checkNewPassword applies the password rules to a new password. It also
// refuses what no field of a form or JSON body may hold (web refuses it
// before auth sees it): a NUL byte, or bytes that are not UTF-8, which
// NFKC (normalisePassword) would turn into U+FFFD, so that different
// passwords would hash alike.
func checkNewPassword(p string) error {
	if len(p) > MaxPasswordBytes {
		return fmt.Errorf("%w: longer than %d bytes", ErrWeakPassword, MaxPasswordBytes)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("%w: it holds a NUL byte", ErrWeakPassword)
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("%w: it is not valid UTF-8", ErrWeakPassword)
	}
	// Counted as typed and as stored (NFKC), the shorter of the two: NFKC
	// spells one ligature or fraction out in many characters ("ﷺ" is
	// eighteen), and composes an accent typed apart with its letter.
	if min(utf8.RuneCountInString(p), utf8.RuneCountInString(normalisePassword(p))) < MinPasswordRunes {
		return fmt.Errorf("%w: shorter than %d characters", ErrWeakPassword, MinPasswordRunes)
	}
	return nil
}

// NewAccountEmail returns email normalised as CreateUser keeps it, or
// ErrInvalidEmail when CreateUser would refuse it: one that cannot be an
// address (NormaliseEmail), or one that reads as an address but that mail
// would not reach as written ("ann@example.com,", "<ann@example.com>"), so
// that a caller can refuse it before asking for a password.
func NewAccountEmail(email string) (string, error) {
	email, err := NormaliseEmail(email)
	if err != nil {
		return "", err
	}
	if !mailedAsItself(email) {
		return "", ErrInvalidEmail
	}
	return email, nil
}

// CreateUser adds an account, an administrator if admin, and records it
// as an EventUserCreated by by ("cli", "admin:<email>"), as the other
// actions of account administration are; a refused one records nothing.
// The email is normalised; the password must meet the password rules and
// not be breached (ErrBreachedPassword).
func (s *Service) CreateUser(ctx context.Context, email, password string, admin bool, by string) (User, error) {
	email, err := NewAccountEmail(email)
	if err != nil {
		return User{}, err
	}
	if err := checkNewPassword(password); err != nil {
		return User{}, err
	}
	if err := s.checkNotBreached(ctx, password); err != nil {
		return User{}, err
	}
	hash, err := s.hasher.Hash(ctx, password)
	if err != nil {
		return User{}, err
	}
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	u, err := s.store.CreateUser(ctx, email, hash, admin)
	if errors.Is(err, ErrUserExists) {
		return User{}, fmt.Errorf("%w: %s", ErrUserExists, email)
	}
	if err != nil {
		return User{}, s.dbDown("creating user", err)
	}
	role := "member"
	if u.IsAdmin {
		role = "admin"
	}
	s.record(Event{Kind: EventUserCreated, Account: u.Email, UserID: u.ID, Detail: map[string]string{"by": by, "role": role}})
	return u, nil
}

// UserByEmail looks an account up by (normalised) email; ErrNoUser if none.
func (s *Service) UserByEmail(ctx context.Context, email string) (User, error) {
	email, err := NormaliseEmail(email)
	if err != nil {
		return User{}, ErrNoUser
	}
	u, err := s.store.UserByEmail(ctx, email)
	if err != nil && !errors.Is(err, ErrNoUser) {
		return User{}, s.dbDown("reading user", err)
	}
	return u, err
}

// rehashPassword replaces the hash a sign-in verified, old, with a fresh
// hash of the same password made with the current parameters, unless the
// password was replaced meanwhile (ErrPasswordChanged): an unconditional
// write would bring the old password back.
func (s *Service) rehashPassword(ctx context.Context, userID int64, old, hash string) error {
	return s.store.RehashPassword(ctx, userID, old, hash)
}

// SetPassword gives an existing account a new password in the name of by
// (as EventUserCreated's "by"), ends its sessions and forgets its
// devices, and records it as an EventPasswordSet. ErrNoUser if there is
// no such account, ErrWeakPassword or ErrBreachedPassword for a password
// refused; a refused one records nothing.
func (s *Service) SetPassword(ctx context.Context, email, password, by string) error {
	email, err := NormaliseEmail(email)
	if err != nil {
		return err
	}
	if err := checkNewPassword(password); err != nil {
		return err
	}
	if err := s.checkNotBreached(ctx, password); err != nil {
		return err
	}
	hash, err := s.hasher.Hash(ctx, password)
	if err != nil {
		return err
	}
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	userID, err := s.store.SetPassword(ctx, email, hash)
	if err != nil && !errors.Is(err, ErrNoUser) {
		return s.dbDown("setting password", err)
	}
	s.deviceCache.purge()
	s.sessionCache.purge()
	if err != nil {
		return err
	}
	s.record(Event{Kind: EventPasswordSet, Account: email, UserID: userID, Detail: map[string]string{"by": by}})
	return nil
}
