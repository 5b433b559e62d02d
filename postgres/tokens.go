package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
)

// AddResetToken implements auth.ResetTokenStore. The account's row is
// share-locked for it, as AddSignInToken's: a disabling that commits first
// leaves no row to match, and one that commits after spends the token.
func (s *Store) AddResetToken(ctx context.Context, tokenHash []byte, userID int64, createdAt, expiresAt time.Time, changeNotice bool) error {
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO password_reset_tokens (token_hash, user_id, created_at, expires_at, change_notice)
		SELECT $1, id, $3, $4, $5 FROM users WHERE id = $2 AND disabled_at IS NULL FOR SHARE`,
		tokenHash, userID, createdAt, expiresAt, changeNotice)
	if err == nil && tag.RowsAffected() == 0 {
		return auth.ErrNoUser
	}
	return err
}

// ResetTokenUser implements auth.ResetTokenStore.
func (s *Store) ResetTokenUser(ctx context.Context, tokenHash []byte, now time.Time) (userID int64, email string, err error) {
	err = s.pool.QueryRow(ctx, `
		SELECT u.id, u.email FROM password_reset_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.token_hash = $1 AND t.used_at IS NULL AND t.expires_at > $2 AND u.disabled_at IS NULL`, tokenHash, now).
		Scan(&userID, &email)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", auth.ErrInvalidToken
	}
	if err != nil {
		return 0, "", err
	}
	return userID, email, nil
}

// ResetPassword implements auth.ResetTokenStore.
func (s *Store) ResetPassword(ctx context.Context, tokenHash []byte, now time.Time, hash string) (userID int64, email string, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The account first (lockAccountOf). A disabled account's links
		// are spent as it is disabled; one that raced that spends
		// nothing here.
		var err error
		userID, email, err = lockAccountOf(ctx, tx, "password_reset_tokens", tokenHash)
		if err != nil {
			return err
		}
		if err := spendToken(ctx, tx, "password_reset_tokens", tokenHash, now); err != nil {
			return err
		}
		return replacePassword(ctx, tx, userID, hash)
	})
	if err != nil {
		return 0, "", err
	}
	return userID, email, nil
}

// AddUnlockToken implements auth.UnlockTokenStore, locking the account's
// row as AddResetToken does.
func (s *Store) AddUnlockToken(ctx context.Context, tokenHash []byte, userID int64, createdAt, expiresAt time.Time) error {
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO unlock_tokens (token_hash, user_id, created_at, expires_at)
		SELECT $1, id, $3, $4 FROM users WHERE id = $2 AND disabled_at IS NULL FOR SHARE`,
		tokenHash, userID, createdAt, expiresAt)
	if err == nil && tag.RowsAffected() == 0 {
		return auth.ErrNoUser
	}
	return err
}

// UnlockTokenLive implements auth.UnlockTokenStore.
func (s *Store) UnlockTokenLive(ctx context.Context, tokenHash []byte, now time.Time) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM unlock_tokens WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2)`,
		tokenHash, now).Scan(&ok)
	return ok, err
}

// UseUnlockToken implements auth.UnlockTokenStore. The token is spent by
// a conditional UPDATE, so it works once even when confirmations race.
func (s *Store) UseUnlockToken(ctx context.Context, tokenHash []byte, now time.Time, nonceHash []byte, maxDevices int) (userID int64, email string, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		userID, email, err = lockAccountOf(ctx, tx, "unlock_tokens", tokenHash)
		if err != nil {
			return err
		}
		if err := spendToken(ctx, tx, "unlock_tokens", tokenHash, now); err != nil {
			return err
		}
		return insertDevice(ctx, tx, userID, nonceHash, now, maxDevices, true)
	})
	if err != nil {
		return 0, "", err
	}
	return userID, email, nil
}

// spendToken marks the link tokenHash in table used at now, in the
// caller's transaction, or returns ErrInvalidToken if it is spent or
// expired. Spent by a conditional UPDATE, a link is single-use even when
// two confirmations race: the second finds it spent. table is one of the
// code's own, as for lockAccountOf.
func spendToken(ctx context.Context, tx pgx.Tx, table string, tokenHash []byte, now time.Time) error {
	tag, err := tx.Exec(ctx, `UPDATE `+table+` SET used_at = $2
		WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2`, tokenHash, now)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return auth.ErrInvalidToken
	}
	return nil
}

// lockAccountOf locks, in the caller's transaction, the row of the enabled
// account whose link in table is tokenHash, and returns its id and email;
// ErrInvalidToken if there is none such. Every transaction that touches an
// account and its links takes the account's row first (a password change,
// a reset, a disabling, a link spent): in the other order two of them
// could each hold what the other waits for, and Postgres would abort one.
// table is one of the code's own, never input.
func lockAccountOf(ctx context.Context, tx pgx.Tx, table string, tokenHash []byte) (userID int64, email string, err error) {
	err = tx.QueryRow(ctx, `
		SELECT u.id, u.email FROM users u JOIN `+table+` t ON t.user_id = u.id
		WHERE t.token_hash = $1 AND u.disabled_at IS NULL FOR NO KEY UPDATE OF u`, tokenHash).Scan(&userID, &email)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", auth.ErrInvalidToken
	}
	return userID, email, err
}
