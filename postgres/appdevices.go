package postgres

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
)

// KnownAppDevice implements auth.AppStore with one lookup by primary key.
func (s *Store) KnownAppDevice(ctx context.Context, hash []byte, seenAfter time.Time) (bool, error) {
	var known bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM app_devices WHERE hash = $1 AND last_seen_at > $2)`,
		hash, seenAfter).Scan(&known)
	return known, err
}

// AddAppDevice implements auth.AppStore: a device seen again is only
// touched; then the account's devices beyond max, least recently used
// first, are forgotten. xmax is zero for the row an INSERT wrote and not
// for one an ON CONFLICT updated. A transaction-scoped advisory lock on
// the folded account serialises the devices added to its spellings, so the
// bound holds under concurrent sign-ins (its key is the hash's first 64
// bits: two accounts that share it only wait for each other), and orders
// them with its resets (ForgetAppDevices), which take it too.
func (s *Store) AddAppDevice(ctx context.Context, app string, account, folded, hash []byte, decided, at time.Time, max int) (bool, error) {
	var added bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, advisoryKey(folded)); err != nil {
			return err
		}
		var resetSince bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM app_account_resets WHERE account_hash = $1 AND reset_at >= $2)`,
			folded, decided).Scan(&resetSince)
		if err != nil {
			return err
		}
		if resetSince {
			return auth.ErrResetSince
		}
		err = tx.QueryRow(ctx, `
			INSERT INTO app_devices (hash, app, account_hash, folded_hash, first_seen_at, last_seen_at) VALUES ($1, $2, $3, $4, $5, $5)
			ON CONFLICT (hash) DO UPDATE SET last_seen_at = greatest(app_devices.last_seen_at, EXCLUDED.last_seen_at)
			RETURNING xmax = 0`, hash, app, account, folded, at).Scan(&added)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			DELETE FROM app_devices WHERE account_hash = $1 AND hash NOT IN (
				SELECT hash FROM app_devices WHERE account_hash = $1
				ORDER BY last_seen_at DESC, first_seen_at DESC LIMIT $2)`, account, max)
		return err
	})
	return added, err
}

// ForgetAppDevices implements auth.AppStore: it notes the reset, for the
// sign-ins decided before it that are reported after (AddAppDevice), and
// deletes the devices of every spelling of the folded account: those
// kept with it (folded_hash), and those kept before it was, under the
// folded account itself (account_hash).
func (s *Store) ForgetAppDevices(ctx context.Context, folded []byte, at time.Time) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, advisoryKey(folded)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
			INSERT INTO app_account_resets (account_hash, reset_at) VALUES ($1, $2)
			ON CONFLICT (account_hash) DO UPDATE SET reset_at = greatest(app_account_resets.reset_at, EXCLUDED.reset_at)`,
			folded, at)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM app_devices WHERE account_hash = $1 OR folded_hash = $1`, folded)
		n = int(tag.RowsAffected())
		return err
	})
	return n, err
}

// ForgetNewAppDevices implements auth.AppStore: one DELETE by
// app_devices_first_seen_idx.
func (s *Store) ForgetNewAppDevices(ctx context.Context, since time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM app_devices WHERE first_seen_at >= $1`, since)
	return int(tag.RowsAffected()), err
}

// advisoryKey is the advisory lock's key of an account hash: its first
// 64 bits (the hash is 32 bytes; shorter input keys on what there is).
func advisoryKey(account []byte) int64 {
	var b [8]byte
	copy(b[:], account)
	return int64(binary.BigEndian.Uint64(b[:]))
}
