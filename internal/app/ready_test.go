package app_test

import (
	"context"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/app"
	"github.com/xcloak/xcloak/internal/testenv"
)

// TestReadyChecksEachStoreOnItsOwn: a Redis that swallows connections
// (a host gone from the network, whose dials only time out) takes the
// whole bound of a readiness check; Postgres, which answers, must still
// be reported ready, or every replica leaves the load balancer while the
// failure policy says they should serve.
func TestReadyChecksEachStoreOnItsOwn(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// A dial that answers only when its context ends, as one to an
	// address that drops every packet.
	swallow := func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	rdb := redis.NewClient(&redis.Options{Addr: "192.0.2.1:6379", Dialer: swallow, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	hasher, err := auth.NewHasher(auth.DefaultParams, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cfg := auth.DefaultConfig()
	cfg.Secret = []byte("k3J9xQ2mVb7LzR4tW8nY1pC6dF0hG5sA")
	cfg.PublicURL, _ = url.Parse("https://login.example.test/")
	a, err := app.New(cfg, app.Deps{Postgres: pool, Redis: rdb, KeyPrefix: "xcloak:", Hasher: hasher, Mailer: auth.LogMailer{}})
	if err != nil {
		t.Fatal(err)
	}

	// A bound of 5 s, which the Redis check takes whole: Postgres must
	// answer within it, and a loaded machine may take more than half a
	// second over a ping, on a connection it first has to open.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	got := a.Ready(ctx)
	if got["redis"] == nil {
		t.Errorf("redis: ready, though no dial to it can finish")
	}
	if err := got["postgres"]; err != nil {
		t.Errorf("postgres: %v; the check of Redis took the bound of the check of Postgres", err)
	}
}
