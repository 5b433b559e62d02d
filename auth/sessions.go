package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
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
// verified, is still the account's (errPasswordChanged otherwise). The
// account's row is share-locked for it: a password replacement that
// commits first leaves no row to match, and one that commits after sees
// the session and ends it. Either way no session made with a replaced
// password outlives the replacement.
func (s *Service) createSession(ctx context.Context, u User, passwordHash string) (Session, error) {
	token, hash := newToken()
	now := s.now()
	sess := Session{Token: token, UserID: u.ID, Email: u.Email, IsAdmin: u.IsAdmin, CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionTTL)}
	tag, err := s.db.Exec(ctx, `
		INSERT INTO sessions (id_hash, user_id, created_at, expires_at, last_seen_at)
		SELECT $1, id, $3, $4, $3 FROM users WHERE id = $2 AND password_hash = $5 FOR SHARE`,
		hash, u.ID, sess.CreatedAt, sess.ExpiresAt, passwordHash)
	if err != nil {
		return Session{}, s.dbDown("creating session", err)
	}
	if tag.RowsAffected() == 0 {
		return Session{}, errPasswordChanged
	}
	return sess, nil
}

// Session returns the live session a token names, or ErrNoSession.
func (s *Service) Session(ctx context.Context, token string) (Session, error) {
	if !wellFormedToken(token) {
		return Session{}, ErrNoSession
	}
	var sess Session
	err := s.db.QueryRow(ctx, `
		SELECT s.user_id, u.email, u.is_admin, s.created_at, s.expires_at
		FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.id_hash = $1 AND s.expires_at > $2`, hashToken(token), s.now()).
		Scan(&sess.UserID, &sess.Email, &sess.IsAdmin, &sess.CreatedAt, &sess.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Session{}, ErrNoSession
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
	if _, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE id_hash = $1`, hashToken(token)); err != nil {
		return s.dbDown("ending session", err)
	}
	return nil
}
