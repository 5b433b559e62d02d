package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// User is an account.
type User struct {
	ID           int64
	Email        string
	PasswordHash string
	IsAdmin      bool
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Password rules: NIST SP 800-63B asks for at least 8 characters and no
// composition rules; the upper bound keeps hashing cheap to refuse.
const MinPasswordRunes = 8

func checkNewPassword(p string) error {
	if len(p) > MaxPasswordBytes {
		return fmt.Errorf("%w: longer than %d bytes", ErrWeakPassword, MaxPasswordBytes)
	}
	n := 0
	for range NormalisePassword(p) {
		n++
	}
	if n < MinPasswordRunes {
		return fmt.Errorf("%w: shorter than %d characters", ErrWeakPassword, MinPasswordRunes)
	}
	return nil
}

const userColumns = "id, email, password_hash, is_admin, created_at, updated_at"

func scanUser(row pgx.Row) (User, error) {
	var u User
	err := row.Scan(&u.ID, &u.Email, &u.PasswordHash, &u.IsAdmin, &u.CreatedAt, &u.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, ErrNoUser
	}
	return u, err
}

// CreateUser adds an account. The email is normalised; the password must
// meet the password rules.
func (s *Service) CreateUser(ctx context.Context, email, password string, admin bool) (User, error) {
	email, err := NormaliseEmail(email)
	if err != nil {
		return User{}, err
	}
	if err := checkNewPassword(password); err != nil {
		return User{}, err
	}
	hash, err := s.hasher.Hash(ctx, password)
	if err != nil {
		return User{}, err
	}
	u, err := scanUser(s.db.QueryRow(ctx,
		`INSERT INTO users (email, password_hash, is_admin) VALUES ($1, $2, $3) RETURNING `+userColumns,
		email, hash, admin))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return User{}, fmt.Errorf("%w: %s", ErrUserExists, email)
	}
	if err != nil {
		return User{}, s.dbDown("creating user", err)
	}
	return u, nil
}

// UserByEmail looks an account up by (normalised) email; ErrNoUser if none.
func (s *Service) UserByEmail(ctx context.Context, email string) (User, error) {
	email, err := NormaliseEmail(email)
	if err != nil {
		return User{}, ErrNoUser
	}
	u, err := scanUser(s.db.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE email = $1`, email))
	if err != nil && !errors.Is(err, ErrNoUser) {
		return User{}, s.dbDown("reading user", err)
	}
	return u, err
}

// rehashPassword replaces the hash a sign-in verified, old, with a fresh
// hash of the same password made with the current parameters, unless the
// password was replaced meanwhile (errPasswordChanged): an unconditional
// write would bring the old password back.
func (s *Service) rehashPassword(ctx context.Context, userID int64, old, hash string) error {
	tag, err := s.db.Exec(ctx, `UPDATE users SET password_hash = $3, updated_at = now() WHERE id = $1 AND password_hash = $2`, userID, old, hash)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return errPasswordChanged
	}
	return nil
}

// querier is what pgxpool.Pool and pgx.Tx share.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// SetPassword gives an existing account a new password, as an operator
// does from the command line, ends its sessions and forgets its devices.
// ErrNoUser if there is no such account.
func (s *Service) SetPassword(ctx context.Context, email, password string) error {
	email, err := NormaliseEmail(email)
	if err != nil {
		return err
	}
	if err := checkNewPassword(password); err != nil {
		return err
	}
	hash, err := s.hasher.Hash(ctx, password)
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, `SELECT id FROM users WHERE email = $1`, email).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNoUser
		}
		if err != nil {
			return err
		}
		return replacePassword(ctx, tx, id, hash)
	})
	if err != nil && !errors.Is(err, ErrNoUser) {
		return s.dbDown("setting password", err)
	}
	s.deviceCache.purge()
	return err
}

// replacePassword is what every change of a password does, in the
// caller's transaction: a reset, an operator's SetPassword, and a change by
// the account's owner. It stores the new hash, ends every session and
// forgets every known device, so that no browser keeps what the old
// password gave it. Purge the device cache once the transaction commits.
func replacePassword(ctx context.Context, tx pgx.Tx, userID int64, hash string) error {
	if _, err := tx.Exec(ctx, `UPDATE users SET password_hash = $2, updated_at = now() WHERE id = $1`, userID, hash); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1`, userID); err != nil {
		return err
	}
	return forgetDevices(ctx, tx, userID)
}
