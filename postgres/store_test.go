package postgres_test

import (
	"testing"

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
