package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
)

// RecordLockout implements auth.LockoutLog; an account without a user is
// stored with a NULL user_id, and so is one deleted since the lockout was
// decided, as its row would have been had it been written first (ON
// DELETE SET NULL): the lock is in force, and its record must not be
// refused by the foreign key. The account's row is key-share locked for
// it, so a deletion at the same moment either commits first (and the id
// is NULL) or waits for the row.
func (s *Store) RecordLockout(ctx context.Context, l auth.Lockout) error {
	var userID *int64
	if l.UserID != 0 {
		userID = &l.UserID
	}
	_, err := s.pool.Exec(ctx,
		`INSERT INTO lockouts (account_key, user_id, level, failures, locked_at, locked_until)
		 VALUES ($1, (SELECT id FROM users WHERE id = $2 FOR KEY SHARE), $3, $4, $5, $6)`,
		l.Account, userID, l.Level, l.Failures, l.LockedAt, l.LockedUntil)
	return err
}

// ClearLockout implements auth.LockoutLog.
func (s *Store) ClearLockout(ctx context.Context, account string, at time.Time, by string) error {
	_, err := s.pool.Exec(ctx,
		`UPDATE lockouts SET cleared_at = $2, cleared_by = $3
		 WHERE account_key = $1 AND cleared_at IS NULL AND locked_until > $2`,
		account, at, by)
	return err
}

// EndLockouts implements auth.LockoutLog. The rows it ends get cleared_at
// = locked_until and cleared_by = 'expired' (so, since it runs, an
// expired lockout is no longer left uncleared). Each row is ended by one
// statement only: a second replica's statement either skips the rows the
// first holds locked or sees them cleared.
func (s *Store) EndLockouts(ctx context.Context, now time.Time, limit int) ([]auth.Lockout, error) {
	rows, err := s.pool.Query(ctx, `
		UPDATE lockouts SET cleared_at = locked_until, cleared_by = $3
		WHERE cleared_at IS NULL AND id IN (
			SELECT id FROM lockouts WHERE cleared_at IS NULL AND locked_until <= $1
			ORDER BY locked_until LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING id, account_key, coalesce(user_id, 0), level, failures, locked_at, locked_until`,
		now, limit, auth.LockoutExpired)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanLockout)
}

// LockoutListed implements auth.LockoutLog.
func (s *Store) LockoutListed(ctx context.Context, account string, now time.Time) (bool, error) {
	var listed bool
	err := s.pool.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM lockouts WHERE account_key = $1 AND cleared_at IS NULL AND locked_until > $2)`,
		account, now).Scan(&listed)
	return listed, err
}

// latestLockouts selects the latest lockout of each account in force at
// $1, as current, for a query to order and cut; equal times go by the
// newest row.
const latestLockouts = `
	SELECT * FROM (
		SELECT DISTINCT ON (account_key) id, account_key, coalesce(user_id, 0) AS user_id, level, failures, locked_at, locked_until
		FROM lockouts WHERE cleared_at IS NULL AND locked_until > $1
		ORDER BY account_key, locked_at DESC, id DESC
	) current`

// ActiveLockouts implements auth.LockoutLog.
func (s *Store) ActiveLockouts(ctx context.Context, now time.Time, limit int) ([]auth.Lockout, error) {
	rows, err := s.pool.Query(ctx, latestLockouts+` ORDER BY locked_at DESC, id DESC LIMIT $2`, now, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanLockout)
}

// LockoutsToHold implements auth.LockoutLog: ActiveLockouts' query
// without the second step's locks, with XCloak's own accounts first, those
// that exist before the others, no dearer (its last sort keeps only the
// first limit rows).
func (s *Store) LockoutsToHold(ctx context.Context, now time.Time, limit int) ([]auth.Lockout, error) {
	rows, err := s.pool.Query(ctx, latestLockouts+` WHERE NOT starts_with(account_key, $3)
		ORDER BY account_key LIKE 'app %', user_id = 0, locked_at DESC, id DESC LIMIT $2`, now, limit, auth.SecondStepLockPrefix)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanLockout)
}

func scanLockout(row pgx.CollectableRow) (auth.Lockout, error) {
	var l auth.Lockout
	err := row.Scan(&l.ID, &l.Account, &l.UserID, &l.Level, &l.Failures, &l.LockedAt, &l.LockedUntil)
	return l, err
}
