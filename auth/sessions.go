package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
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
	ExpiresAt time.Time
	// MustChangePassword limits the session to changing the password
	// (and signing out) until it is changed: it was made by a known
	// device with a password found in a breach corpus (breached.go).
	MustChangePassword bool
}

// newToken returns 256 random bits in unpadded base64url (43 characters)
// and the hash to store.
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
// verified, is still the account's (ErrPasswordChanged otherwise), so no
// session made with a replaced password outlives the replacement.
func (s *Service) createSession(ctx context.Context, u User, passwordHash string) (Session, error) {
	return s.createSessionWith(ctx, u, passwordHash, false)
}

// createSessionWith is createSession for a session that, with
// mustChangePassword, can only change the password.
func (s *Service) createSessionWith(ctx context.Context, u User, passwordHash string, mustChangePassword bool) (Session, error) {
	token, hash := newToken()
	now := s.now()
	sess := Session{Token: token, UserID: u.ID, Email: u.Email, IsAdmin: u.IsAdmin, CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionTTL),
		MustChangePassword: mustChangePassword}
	err := s.store.CreateSession(ctx, hash, sess, passwordHash)
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
	if !wellFormedToken(token) {
		return Session{}, ErrNoSession
	}
	sess, err := s.store.SessionByHash(ctx, hashToken(token), s.now())
	if errors.Is(err, ErrNoSession) {
		return Session{}, err
	}
	if err != nil {
		return Session{}, s.dbDown("reading session", err)
	}
	return sess, nil
}

// Logout ends the session a token names; an unknown token is not an error.
func (s *Service) Logout(ctx context.Context, token string) error {
	if !wellFormedToken(token) {
		return nil
	}
	if err := s.store.DeleteSession(ctx, hashToken(token)); err != nil {
		return s.dbDown("ending session", err)
	}
	return nil
}
