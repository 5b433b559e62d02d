package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/xcloak/xcloak/auth"
)

const userColumns = "id, email, password_hash, is_admin, created_at, updated_at, disabled_at, sign_outs"

func scanUser(row pgx.Row) (auth.User, error) {
	var u auth.User
	var disabledAt *time.Time
	err := row.Scan(&u.ID, &u.Email, &u.PasswordHash, &u.IsAdmin, &u.CreatedAt, &u.UpdatedAt, &disabledAt, &u.SignOuts)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.User{}, auth.ErrNoUser
	}
	if disabledAt != nil {
		u.DisabledAt = *disabledAt
	}
	return u, err
}

// CreateUser implements auth.UserStore.
func (s *Store) CreateUser(ctx context.Context, email, passwordHash string, admin bool) (auth.User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx,
		`INSERT INTO users (email, password_hash, is_admin) VALUES ($1, $2, $3) RETURNING `+userColumns,
		email, passwordHash, admin))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return auth.User{}, auth.ErrUserExists
	}
	return u, err
}

// UserByEmail implements auth.UserStore.
func (s *Store) UserByEmail(ctx context.Context, email string) (auth.User, error) {
	return scanUser(s.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE email = $1`, email))
}

// RehashPassword implements auth.UserStore: the write is conditional on
// the old hash, so it never undoes a replacement.
func (s *Store) RehashPassword(ctx context.Context, userID int64, old, hash string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE users SET password_hash = $3, updated_at = now() WHERE id = $1 AND password_hash = $2`, userID, old, hash)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return auth.ErrPasswordChanged
	}
	return nil
}

// SetPassword implements auth.UserStore.
func (s *Store) SetPassword(ctx context.Context, email, hash string) (int64, error) {
	var id int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT id FROM users WHERE email = $1`, email).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return auth.ErrNoUser
		}
		if err != nil {
			return err
		}
		return replacePassword(ctx, tx, id, hash)
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// stopPasskeysAlone stops the account's passkeys signing in without the
// password until each has served as the second step after the new one: a
// passkey registered by whoever had the old password would otherwise
// outlive the change that ended that person's sessions.
func stopPasskeysAlone(ctx context.Context, tx pgx.Tx, userID int64) error {
	_, err := tx.Exec(ctx, `UPDATE second_factors SET signs_in_alone = false WHERE user_id = $1 AND kind = 'webauthn'`, userID)
	return err
}

// forgetSecondSteps deletes the account's pending second steps, which a
// new password ends. Answered after it, one begun with the old password
// signs nothing in, but would still have a code checked, a recovery code
// spent or its passkey used.
func forgetSecondSteps(ctx context.Context, tx pgx.Tx, userID int64) error {
	_, err := tx.Exec(ctx, `DELETE FROM mfa_challenges WHERE user_id = $1`, userID)
	return err
}

// replacePassword is what a reset and an operator's SetPassword do, in the
// caller's transaction (a change by the account's owner does the same but
// keep its own session and device). It stores the new hash, ends every
// session and pending second step, forgets every known device, spends
// every open reset link (a change notice's too: the operator's or the
// owner's new password is the account's recovery) and stops the passkeys
// signing in alone (stopPasskeysAlone), so that no browser, key or link
// keeps what the old password gave it.
func replacePassword(ctx context.Context, tx pgx.Tx, userID int64, hash string) error {
	if _, err := tx.Exec(ctx, `UPDATE users SET password_hash = $2, updated_at = now() WHERE id = $1`, userID, hash); err != nil {
		return err
	}
	if err := stopPasskeysAlone(ctx, tx, userID); err != nil {
		return err
	}
	if err := forgetSecondSteps(ctx, tx, userID); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1`, userID); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE password_reset_tokens SET used_at = now() WHERE user_id = $1 AND used_at IS NULL`, userID); err != nil {
		return err
	}
	return forgetDevices(ctx, tx, userID)
}
