package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/postgres"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newStore returns a Store on a database of its own.
func newStore(t *testing.T) *postgres.Store {
	t.Helper()
	_, pool := testenv.Schema(t)
	return postgres.New(pool)
}

// verified is what a change to u's factors verified of it, as read.
func verified(u auth.User) auth.Verified {
	return auth.Verified{PasswordHash: u.PasswordHash, SignOuts: u.SignOuts}
}

// TestStore runs the promises of auth's storage interfaces, the races
// included, against PostgreSQL. The cases share one database, emptied
// before each, which is much quicker than a database each.
func TestStore(t *testing.T) {
	s := newStore(t)
	authtest.TestStore(t, func(t *testing.T) auth.Store {
		if _, err := s.Pool().Exec(t.Context(), `TRUNCATE users, sessions, devices, password_reset_tokens,
			unlock_tokens, sign_in_tokens, lockouts, security_events RESTART IDENTITY CASCADE`); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// holdRows begins a transaction that takes the rows query locks, as
// another request in the middle of its work would, and leaves it open:
// the caller commits it when the waits it wants are queued behind it, and
// it is rolled back at the test's end otherwise.
func holdRows(t *testing.T, s *postgres.Store, query string, args ...any) pgx.Tx {
	t.Helper()
	hold, err := s.Pool().Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Rollback(context.Background()) })
	if _, err := hold.Exec(t.Context(), query, args...); err != nil {
		t.Fatal(err)
	}
	return hold
}
