package postgres

import (
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is XCloak's PostgreSQL database. Its methods, spread over one file
// per kind of record, implement the interfaces package auth declares. It
// keeps no clock: every time it writes or compares comes from the caller,
// whose clock tests can set.
type Store struct {
	pool *pgxpool.Pool
	// activityStep is how many events the first step of AccountActivity
	// reads (defaultActivityStep; tests make it small).
	activityStep int
}

// New returns the Store on pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, activityStep: defaultActivityStep}
}

// Pool returns the connection pool, for readiness checks and migrations.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
