package postgres

import (
	"context"
	"time"
)

// KnownAppDevice implements auth.AppStore with one lookup by primary key.
func (s *Store) KnownAppDevice(ctx context.Context, hash []byte, seenAfter time.Time) (bool, error) {
	var known bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM app_devices WHERE hash = $1 AND last_seen_at > $2)`,
		hash, seenAfter).Scan(&known)
	return known, err
}

// AddAppDevice implements auth.AppStore in one statement: a device seen
// again is only touched. xmax is zero for the row an INSERT wrote and not
// for one an ON CONFLICT updated.
func (s *Store) AddAppDevice(ctx context.Context, app string, hash []byte, at time.Time) (bool, error) {
	var added bool
	err := s.pool.QueryRow(ctx, `
		INSERT INTO app_devices (hash, app, first_seen_at, last_seen_at) VALUES ($1, $2, $3, $3)
		ON CONFLICT (hash) DO UPDATE SET last_seen_at = greatest(app_devices.last_seen_at, EXCLUDED.last_seen_at)
		RETURNING xmax = 0`, hash, app, at).Scan(&added)
	return added, err
}
