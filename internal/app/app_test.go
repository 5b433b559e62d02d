package app_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/app"
	"github.com/xcloak/xcloak/ratelimit"
)

// TestNewRefusesBadInput: what New cannot build from is a clear error,
// found before any connection is used.
func TestNewRefusesBadInput(t *testing.T) {
	cfg := auth.DefaultConfig()
	cfg.Secret = []byte("0123456789abcdef0123456789abcdef")
	cfg.PublicURL, _ = url.Parse("https://login.example.test/")
	// A client of an address nothing listens on: New must not talk to it.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	// Likewise a pool, which connects only when first used.
	pool, err := pgxpool.New(t.Context(), "postgres://127.0.0.1:1/unused")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	badPolicy := cfg
	badPolicy.RedisFailure = ratelimit.FailurePolicy("sometimes")
	badLockout := cfg
	badLockout.Lockout.Threshold = -1
	for _, tc := range []struct {
		name string
		cfg  auth.Config
		d    app.Deps
		want string
	}{
		{"no Postgres or Redis", cfg, app.Deps{}, "Postgres and Redis are required"},
		{"unknown failure policy", badPolicy, app.Deps{Postgres: pool, Redis: rdb}, `"sometimes"`},
		{"negative lockout threshold", badLockout, app.Deps{Postgres: pool, Redis: rdb}, "lockout"},
		{"no hasher or mailer", cfg, app.Deps{Postgres: pool, Redis: rdb}, "required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := app.New(tc.cfg, tc.d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, %v; want an error saying %s", a, err, tc.want)
			}
		})
	}
}
