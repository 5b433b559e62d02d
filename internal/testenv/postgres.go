package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/xcloak/xcloak/migrations"
)

// defaultDatabaseURL names the postgres role and database, which every
// Postgres installation has, so tests work on a fresh server with trust auth.
const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// DatabaseURL returns the URL of the Postgres server tests use:
// XCLOAK_TEST_DATABASE_URL, else XCLOAK_DATABASE_URL, else
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable.
// Only its server, user and parameters matter to [Postgres]; the database
// it names is replaced.
func DatabaseURL() string {
	u, _ := databaseURL()
	return u
}

// databaseURL also says where the URL came from, for failure messages.
func databaseURL() (raw, source string) {
	return fromEnv(defaultDatabaseURL, "XCLOAK_TEST_DATABASE_URL", "XCLOAK_DATABASE_URL")
}

// Postgres creates a fresh, empty database named "xcloak_test_<12 hex digits>"
// on the server at [DatabaseURL] and returns its URL: the same server, user
// and parameters, with the database name replaced.
//
// When the test ends the database is dropped, even if connections to it are
// still open. An unreachable server fails the test.
func Postgres(t testing.TB) string {
	t.Helper()
	raw, source := databaseURL()
	where := fmt.Sprintf("%s (from %s)", redactURL(raw), source)

	name := "xcloak_test_" + randomHex(6)
	adminURL, err := withDatabase(raw, "postgres")
	if err != nil {
		t.Fatalf("testenv: database URL %s is not usable: %v", where, err)
	}
	testURL, err := withDatabase(raw, name)
	if err != nil {
		t.Fatalf("testenv: database URL %s is not usable: %v", where, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("testenv: cannot reach Postgres at %s: %v; start Postgres or set XCLOAK_TEST_DATABASE_URL", where, err)
	}
	defer admin.Close(context.Background())

	if err := createDatabase(ctx, admin, name); err != nil {
		t.Fatalf("testenv: creating database %s on %s: %v", name, where, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := dropDatabase(ctx, adminURL, name); err != nil {
			t.Errorf("testenv: dropping database %s on %s: %v", name, where, err)
		}
	})
	return testURL
}

// Schema makes a database of its own for the test, as Postgres does, brings
// it to XCloak's schema and returns its URL and a pool on it, closed when
// the test ends.
func Schema(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	dbURL := Postgres(t)
	if _, err := migrations.Up(context.Background(), dbURL); err != nil {
		t.Fatalf("testenv: migrating the test database: %v", err)
	}
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return dbURL, pool
}

// createDatabase creates name, retrying while the template database is busy:
// Postgres refuses to copy template1 while another session is connected to
// it, which happens briefly when many tests start at once.
func createDatabase(ctx context.Context, admin *pgx.Conn, name string) error {
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	for {
		_, err := admin.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dropDatabase drops name over a new admin connection; the test's own pools
// may still be open, which WITH (FORCE) takes care of.
func dropDatabase(ctx context.Context, adminURL, name string) error {
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	_, err = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// withDatabase returns raw with its database replaced by name. It accepts
// both connection string forms pgx does: URLs and keyword/value lists.
func withDatabase(raw, name string) (string, error) {
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		// In a keyword/value list the last setting wins.
		return strings.TrimSpace(raw) + " dbname=" + name, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", urlErrorCause(err)
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}
