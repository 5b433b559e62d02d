package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
)

// AddSignInToken implements auth.SignInTokenStore. The account's row is
// share-locked for it, as CreateSession's: a replacement, a sign-out
// everywhere or a disabling that commits first leaves no row to match,
// and one that commits after deletes or spends the token.
func (s *Store) AddSignInToken(ctx context.Context, tokenHash []byte, userID int64, passwordHash string, signOuts int64, createdAt, expiresAt time.Time) error {
	var enabled, added bool
	err := s.pool.QueryRow(ctx, `
		WITH u AS (
			SELECT id, password_hash = $3 AND sign_outs = $6 AS same FROM users
			WHERE id = $2 AND disabled_at IS NULL FOR SHARE
		), added AS (
			INSERT INTO sign_in_tokens (token_hash, user_id, password_hash, created_at, expires_at)
			SELECT $1, id, $3, $4, $5 FROM u WHERE same RETURNING 1
		)
		SELECT EXISTS (SELECT 1 FROM u), EXISTS (SELECT 1 FROM added)`,
		tokenHash, userID, passwordHash, createdAt, expiresAt, signOuts).Scan(&enabled, &added)
	switch {
	case err != nil:
		return err
	case !enabled:
		return auth.ErrNoUser
	case !added:
		return auth.ErrPasswordChanged
	}
	return nil
}

// SignInTokenLive implements auth.SignInTokenStore.
func (s *Store) SignInTokenLive(ctx context.Context, tokenHash []byte, now time.Time) (string, error) {
	var email string
	err := s.pool.QueryRow(ctx, `
		SELECT u.email FROM sign_in_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.token_hash = $1 AND t.used_at IS NULL AND t.expires_at > $2
		  AND u.password_hash = t.password_hash AND u.disabled_at IS NULL`,
		tokenHash, now).Scan(&email)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return email, err
}

// UseSignInToken implements auth.SignInTokenStore. The account's row is
// locked before the token is spent, so a password replaced at the same
// moment either commits first (and the token no longer matches) or waits
// for the device this adds, and forgets it.
func (s *Store) UseSignInToken(ctx context.Context, tokenHash []byte, now time.Time, nonceHash []byte, maxDevices int) (auth.User, error) {
	var u auth.User
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		u, err = scanUser(tx.QueryRow(ctx, `
			SELECT u.id, u.email, u.password_hash, u.is_admin, u.created_at, u.updated_at, u.disabled_at, u.sign_outs FROM users u JOIN sign_in_tokens t ON t.user_id = u.id
			WHERE t.token_hash = $1 AND u.disabled_at IS NULL FOR NO KEY UPDATE OF u`, tokenHash))
		if errors.Is(err, auth.ErrNoUser) {
			return auth.ErrInvalidToken
		}
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			UPDATE sign_in_tokens SET used_at = $2
			WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 AND password_hash = $3`,
			tokenHash, now, u.PasswordHash)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return auth.ErrInvalidToken
		}
		return insertDevice(ctx, tx, u.ID, nonceHash, now, maxDevices, true)
	})
	if err != nil {
		return auth.User{}, err
	}
	return u, nil
}
