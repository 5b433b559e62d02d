package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
)

// KnownDevice implements auth.DeviceStore with one indexed query.
func (s *Store) KnownDevice(ctx context.Context, email string, nonceHash []byte, seenAfter time.Time) (bool, error) {
	var known bool
	err := s.pool.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM devices d JOIN users u ON u.id = d.user_id
		               WHERE d.nonce_hash = $1 AND u.email = $2 AND d.last_seen_at > $3)`,
		nonceHash, email, seenAfter).Scan(&known)
	return known, err
}

// AddDevice implements auth.DeviceStore. A disabled account gets no
// device, as it gets no session (CreateSession): a sign-in that verified
// its password as it was being disabled leaves no known device behind.
func (s *Store) AddDevice(ctx context.Context, userID int64, passwordHash string, signOuts int64, nonceHash []byte, at time.Time, max int, verified bool) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var current string
		var signedOut int64
		err := tx.QueryRow(ctx, `SELECT password_hash, sign_outs FROM users WHERE id = $1 AND disabled_at IS NULL FOR NO KEY UPDATE`, userID).Scan(&current, &signedOut)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && passwordHash != "" && (current != passwordHash || signedOut != signOuts)) {
			return auth.ErrPasswordChanged
		}
		if err != nil {
			return err
		}
		return insertDevice(ctx, tx, userID, nonceHash, at, max, verified)
	})
}

// insertDevice adds a known device, verified or not, in the caller's
// transaction and forgets the least recently used devices beyond max. It
// locks the account's row first, which serialises the devices added to
// one account, so the bound holds under concurrent sign-ins.
func insertDevice(ctx context.Context, tx pgx.Tx, userID int64, nonceHash []byte, now time.Time, max int, verified bool) error {
	if _, err := tx.Exec(ctx, `SELECT FROM users WHERE id = $1 FOR NO KEY UPDATE`, userID); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx,
		`INSERT INTO devices (nonce_hash, user_id, created_at, last_seen_at, verified) VALUES ($1, $2, $3, $3, $4)`,
		nonceHash, userID, now, verified); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `
		DELETE FROM devices WHERE user_id = $1 AND nonce_hash NOT IN (
			SELECT nonce_hash FROM devices WHERE user_id = $1
			ORDER BY last_seen_at DESC, created_at DESC LIMIT $2)`, userID, max)
	return err
}

// ForgetNewDevices implements auth.DeviceStore. The accounts' rows are
// locked first, in id order, as every transaction that ends an account's
// sessions and forgets its devices takes its account's row first (a
// reset, a password change, a disabling, a sign-out everywhere): in the
// other order the two could each hold what the other waits for, and
// Postgres would abort one. The accounts are those with a device new
// since then when the rows are locked; a device added after that was
// added too late to matter, by a sign-in that attack mode already held or
// not.
func (s *Store) ForgetNewDevices(ctx context.Context, since time.Time, also []int64) ([]auth.User, error) {
	if also == nil {
		also = []int64{}
	}
	var out []auth.User
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT id FROM users
			WHERE id IN (SELECT user_id FROM devices WHERE created_at >= $1 AND NOT verified UNION SELECT unnest($2::bigint[]))
			ORDER BY id FOR NO KEY UPDATE`, since, also)
		if err != nil {
			return err
		}
		locked, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		if len(locked) == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, `
			WITH gone AS (
				DELETE FROM devices WHERE created_at >= $1 AND NOT verified AND user_id = ANY($3) RETURNING user_id
			), ended AS (
				DELETE FROM sessions WHERE created_at >= $1 AND user_id = ANY($3)
				AND (user_id IN (SELECT user_id FROM gone) OR user_id = ANY($2))
			)
			SELECT id, email FROM users WHERE id IN (SELECT user_id FROM gone) ORDER BY id`, since, also, locked)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (auth.User, error) {
			var u auth.User
			err := r.Scan(&u.ID, &u.Email)
			return u, err
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// TouchDevice implements auth.DeviceStore.
func (s *Store) TouchDevice(ctx context.Context, nonceHash []byte, at time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE devices SET last_seen_at = $2 WHERE nonce_hash = $1`, nonceHash, at)
	return err
}

// forgetDevices deletes every known device of the user, and the open
// unlock links that would add one, in the caller's transaction.
func forgetDevices(ctx context.Context, tx pgx.Tx, userID int64) error {
	if _, err := tx.Exec(ctx, `DELETE FROM devices WHERE user_id = $1`, userID); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `DELETE FROM unlock_tokens WHERE user_id = $1 AND used_at IS NULL`, userID)
	return err
}
