package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/xcloak/xcloak/auth"
)

// boundsBackend opens the backend the user command opens on a database of
// the test's own, its URL changed by edit (nil: as testenv gives it), and
// returns it with the URL.
func boundsBackend(t *testing.T, edit func(t *testing.T, raw string) string) (*backend, string) {
	t.Helper()
	vars := storeSettings(t)
	if edit != nil {
		vars["XCLOAK_DATABASE_URL"] = edit(t, vars["XCLOAK_DATABASE_URL"])
	}
	cfg, err := loadConfig(flag.NewFlagSet("user", flag.ContinueOnError), nil, env(vars), io.Discard, io.Discard, forUser)
	if err != nil {
		t.Fatal(err)
	}
	b, err := openUserBackend(t.Context(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, cfg.DatabaseURL
}

// withParam adds name=value to the database URL raw, in either form pgx
// reads. A space is written %20: pgx, as libpq, reads a '+' as itself.
func withParam(t *testing.T, raw, name, value string) string {
	t.Helper()
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		return raw + " " + name + "='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(value) + "'"
	}
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	return raw + sep + name + "=" + strings.ReplaceAll(url.QueryEscape(value), "+", "%20")
}

// shown is what SHOW name says on a connection of b's pool.
func shown(t *testing.T, b *backend, name string) string {
	t.Helper()
	var v string
	if err := b.pool.QueryRow(t.Context(), "SHOW "+name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPoolConnectionsAreBounded: a connection of the service's pool, on a
// URL that sets none of them, waits for a lock 10 s at most, runs a
// statement 30 s at most and stays idle in a transaction a minute at
// most, so that a lock held elsewhere or a runaway query cannot keep the
// pool's few connections for as long as its callers wait.
func TestPoolConnectionsAreBounded(t *testing.T) {
	b, _ := boundsBackend(t, nil)
	for name, want := range map[string]string{
		"statement_timeout":                   "30s",
		"lock_timeout":                        "10s",
		"idle_in_transaction_session_timeout": "1min",
	} {
		if got := shown(t, b, name); got != want {
			t.Errorf("SHOW %s on the service's pool: %s, want %s", name, got, want)
		}
	}
}

// TestDatabaseURLSetsItsOwnBounds: a bound the URL sets, as a parameter
// or in options, is the one a connection has, 0 switching it off, and
// the others keep their defaults. A statement on a table another session
// holds then fails at the URL's lock_timeout, before its context
// ends, and reaches the service's callers as ErrUnavailable.
func TestDatabaseURLSetsItsOwnBounds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		param string
		value string
	}{
		{"parameter", "lock_timeout", "200ms"},
		{"options", "options", "-c lock_timeout=200ms"},
		{"options long form", "options", "--lock-timeout=200ms"},
		{"parameter in capitals", "LOCK_TIMEOUT", "200ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, dbURL := boundsBackend(t, func(t *testing.T, raw string) string {
				return withParam(t, withParam(t, raw, tc.param, tc.value), "statement_timeout", "0")
			})
			for name, want := range map[string]string{
				"lock_timeout":                        "200ms",
				"statement_timeout":                   "0",
				"idle_in_transaction_session_timeout": "1min",
			} {
				if got := shown(t, b, name); got != want {
					t.Errorf("SHOW %s: %s, want %s", name, got, want)
				}
			}

			ctx := t.Context()
			holder, err := pgx.Connect(ctx, dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Close(context.Background())
			tx, err := holder.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(context.Background()) }()
			if _, err := tx.Exec(ctx, "LOCK TABLE users IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}

			// Generous, so that it is the lock_timeout that ends the wait.
			wait, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err = b.pool.Exec(wait, "SELECT 1 FROM users LIMIT 1")
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
				t.Fatalf("a read of the locked table: %v, want SQLSTATE 55P03 (lock_not_available)", err)
			}
			if wait.Err() != nil {
				t.Fatalf("the read's context ended (%v) before its lock_timeout", wait.Err())
			}
			_, err = b.svc.UserByEmail(wait, "ann@example.com")
			if !errors.As(err, &pgErr) || pgErr.Code != "55P03" || !errors.Is(err, auth.ErrUnavailable) {
				t.Fatalf("the service reading an account: %v, want ErrUnavailable with SQLSTATE 55P03", err)
			}
		})
	}
}

// TestIdleTransactionEnds: a transaction of the pool left idle past the
// idle_in_transaction_session_timeout is ended by Postgres with its
// session: its next statement fails with SQLSTATE 25P03, a store error
// as any other (the service's dbDown, answered 503), and the pool goes on
// with another connection.
func TestIdleTransactionEnds(t *testing.T) {
	b, dbURL := boundsBackend(t, func(t *testing.T, raw string) string {
		return withParam(t, raw, "idle_in_transaction_session_timeout", "100ms")
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var pid int
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	watcher, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(context.Background())
	for gone := false; !gone; {
		if err := watcher.QueryRow(ctx, "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid).Scan(&gone); err != nil {
			t.Fatalf("waiting for Postgres to end the idle transaction's session: %v", err)
		}
		if !gone {
			time.Sleep(20 * time.Millisecond) // paces the polls, no more
		}
	}
	_, err = tx.Exec(ctx, "SELECT 1")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25P03" {
		t.Fatalf("a statement of the ended transaction: %v, want SQLSTATE 25P03", err)
	}
	if _, err := b.pool.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("the pool after a session ended: %v", err)
	}
}

// TestBoundsAreNoStartupParameters: the bounds are set once a connection
// runs, not sent at its start, where a pooler such as PgBouncer refuses a
// parameter it does not know, and with it every connection.
func TestBoundsAreNoStartupParameters(t *testing.T) {
	pc, err := poolConfig("postgres://xcloak@db.example.com/xcloak")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range sessionBounds {
		if v, ok := pc.ConnConfig.RuntimeParams[b.name]; ok {
			t.Errorf("startup parameter %s=%s", b.name, v)
		}
	}
	if pc.AfterConnect == nil {
		t.Error("no AfterConnect sets the bounds")
	}
}

// TestDatabaseSettingsKeepTheirBounds: a bound the operator set on the
// database (ALTER DATABASE; ALTER ROLE and postgresql.conf alike) is kept:
// XCloak sets only what nothing else did.
func TestDatabaseSettingsKeepTheirBounds(t *testing.T) {
	b, dbURL := boundsBackend(t, nil)
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(t.Context(), `ALTER DATABASE `+pgx.Identifier{cfg.Database}.Sanitize()+` SET lock_timeout = '3s'`); err != nil {
		t.Fatal(err)
	}
	// A new connection reads the database's settings as it starts.
	b.pool.Reset()
	if got := shown(t, b, "lock_timeout"); got != "3s" {
		t.Errorf("SHOW lock_timeout on a database that sets it: %s, want 3s", got)
	}
	if got := shown(t, b, "statement_timeout"); got != "30s" {
		t.Errorf("SHOW statement_timeout beside it: %s, want 30s", got)
	}
}
