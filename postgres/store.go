package postgres

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is XCloak's PostgreSQL database. Its methods, spread over one file
// per kind of record, implement the interfaces package auth declares.
type Store struct {
	pool *pgxpool.Pool
	// now is the clock for the timestamps Store writes.
	now func() time.Time
}

// New returns the Store on pool; now is its clock (nil: time.Now).
func New(pool *pgxpool.Pool, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{pool: pool, now: now}
}

// Pool returns the connection pool, for readiness checks and migrations.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
