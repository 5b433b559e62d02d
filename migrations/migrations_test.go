package migrations_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3/lock"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// tables are the tables the schema must create.
var tables = []string{"users", "sessions", "password_reset_tokens", "lockouts", "security_events"}

func TestUpAppliesEverythingOnce(t *testing.T) {
	ctx := t.Context()
	dbURL := testenv.Postgres(t)
	want := latestVersion(t)

	got, err := migrations.Up(ctx, dbURL)
	if err != nil {
		t.Fatalf("first Up: %v", err)
	}
	if got != want {
		t.Errorf("first Up: version = %d, want %d", got, want)
	}

	conn := connect(t, dbURL)
	for _, table := range tables {
		var exists bool
		err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", "public."+table).Scan(&exists)
		if err != nil {
			t.Fatalf("look up table %s: %v", table, err)
		}
		if !exists {
			t.Errorf("table %s does not exist after Up", table)
		}
	}
	before := appliedCount(t, conn)

	got, err = migrations.Up(ctx, dbURL)
	if err != nil {
		t.Fatalf("second Up: %v", err)
	}
	if got != want {
		t.Errorf("second Up: version = %d, want %d", got, want)
	}
	if after := appliedCount(t, conn); after != before {
		t.Errorf("second Up recorded %d more migrations, want none", after-before)
	}
}

func TestUpConcurrently(t *testing.T) {
	dbURL := testenv.Postgres(t)
	want := latestVersion(t)

	const callers = 3
	var wg sync.WaitGroup
	versions := make([]int64, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() { versions[i], errs[i] = migrations.Up(t.Context(), dbURL) })
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Errorf("caller %d: Up: %v", i, errs[i])
		} else if versions[i] != want {
			t.Errorf("caller %d: version = %d, want %d", i, versions[i], want)
		}
	}
}

// TestUpLeavesANewerSchema: a database a newer build migrated past this
// build's last migration is left as it is, at its version, which Latest
// lets a caller tell from its own.
func TestUpLeavesANewerSchema(t *testing.T) {
	if got, want := migrations.Latest(), latestVersion(t); got != want {
		t.Fatalf("Latest() = %d, want %d", got, want)
	}
	dbURL := testenv.Postgres(t)
	if _, err := migrations.Up(t.Context(), dbURL); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, dbURL)
	newer := migrations.Latest() + 1
	if _, err := conn.Exec(t.Context(), "INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)", newer); err != nil {
		t.Fatal(err)
	}
	before := appliedCount(t, conn)
	got, err := migrations.Up(t.Context(), dbURL)
	if err != nil || got != newer {
		t.Errorf("Up on a newer schema: %d, %v; want %d, nil", got, err, newer)
	}
	if after := appliedCount(t, conn); after != before {
		t.Errorf("Up on a newer schema recorded %d migrations, want none", after-before)
	}
}

// migrated returns a connection to a database of its own, migrated.
func migrated(t *testing.T) *pgx.Conn {
	t.Helper()
	dbURL := testenv.Postgres(t)
	if _, err := migrations.Up(t.Context(), dbURL); err != nil {
		t.Fatalf("Up: %v", err)
	}
	return connect(t, dbURL)
}

func TestSchemaConstraints(t *testing.T) {
	ctx := t.Context()
	conn := migrated(t)

	const (
		user     = `INSERT INTO users (email, password_hash) VALUES ('alice@example.com', '$argon2id$v=19$m=65536,t=3,p=2$c2FsdA$aGFzaA')`
		hash32   = `'\x` + "0000000000000000000000000000000000000000000000000000000000000000" + `'::bytea`
		lockout  = `INSERT INTO lockouts (account_key, level, failures, locked_at, locked_until) VALUES ('alice@example.com', 1, 5, '2030-01-01T00:00:00Z', '2030-01-01T00:15:00Z')`
		noErr    = ""
		check    = "23514"
		unique   = "23505"
		foreign  = "23503"
		notNull  = "23502"
		sessionQ = `INSERT INTO sessions (id_hash, user_id, expires_at) SELECT `
	)
	tests := []struct {
		name     string
		stmts    []string
		wantCode string // SQLSTATE of the last statement; "" for success
	}{
		{"valid rows in every table", []string{
			user,
			sessionQ + hash32 + `, id, now() + interval '1 hour' FROM users`,
			`INSERT INTO password_reset_tokens (token_hash, user_id, expires_at) SELECT ` + hash32 + `, id, now() FROM users`,
			lockout,
			`INSERT INTO security_events (kind, account_key, ip, detail) VALUES ('login_failed', 'alice@example.com', '192.0.2.1', '{"reason":"password"}')`,
		}, noErr},
		{"email longer than 254 is refused", []string{
			`INSERT INTO users (email, password_hash) VALUES (repeat('a', 243) || '@example.com', 'h')`,
		}, check},
		{"email of 254 is accepted", []string{
			`INSERT INTO users (email, password_hash) VALUES (repeat('a', 242) || '@example.com', 'h')`,
		}, noErr},
		{"duplicate email is refused", []string{user, user}, unique},
		{"empty password hash is refused", []string{
			`INSERT INTO users (email, password_hash) VALUES ('bob@example.com', '')`,
		}, check},
		{"session id that is not a SHA-256 is refused", []string{
			user,
			sessionQ + `'\x00'::bytea, id, now() FROM users`,
		}, check},
		{"session of a missing user is refused", []string{
			`INSERT INTO sessions (id_hash, user_id, expires_at) VALUES (` + hash32 + `, 999999, now())`,
		}, foreign},
		{"reset token without expiry is refused", []string{
			user,
			`INSERT INTO password_reset_tokens (token_hash, user_id) SELECT ` + hash32 + `, id FROM users`,
		}, notNull},
		{"lockout level 0 is refused", []string{
			`INSERT INTO lockouts (account_key, level, failures, locked_at, locked_until) VALUES ('x', 0, 5, now(), now() + interval '1 minute')`,
		}, check},
		{"lockout ending before it starts is refused", []string{
			`INSERT INTO lockouts (account_key, level, failures, locked_at, locked_until) VALUES ('x', 1, 5, now(), now() - interval '1 minute')`,
		}, check},
		{"two lockouts of one account at one instant are refused", []string{lockout, lockout}, unique},
		{"cleared lockout without a reason is refused", []string{
			`INSERT INTO lockouts (account_key, level, failures, locked_at, locked_until, cleared_at) VALUES ('x', 1, 5, now(), now() + interval '1 minute', now())`,
		}, check},
		{"event detail that is not an object is refused", []string{
			`INSERT INTO security_events (kind, detail) VALUES ('login_failed', '[]')`,
		}, check},
		{"event about a user that does not exist is accepted", []string{
			`INSERT INTO security_events (kind, user_id) VALUES ('login_failed', 999999)`,
		}, noErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			defer tx.Rollback(context.WithoutCancel(ctx))
			last := len(tt.stmts) - 1
			for _, stmt := range tt.stmts[:last] {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					t.Fatalf("setup %q: %v", stmt, err)
				}
			}
			_, err = tx.Exec(ctx, tt.stmts[last])
			if got := sqlState(err); got != tt.wantCode {
				t.Errorf("SQLSTATE = %q, want %q (error: %v)", got, tt.wantCode, err)
			}
		})
	}
}

func TestDeletingUser(t *testing.T) {
	ctx := t.Context()
	conn := migrated(t)

	var userID int64
	err := conn.QueryRow(ctx, `INSERT INTO users (email, password_hash) VALUES ('carol@example.com', 'h') RETURNING id`).Scan(&userID)
	if err != nil {
		t.Fatalf("insert user: %v", err)
	}
	setup := []string{
		`INSERT INTO sessions (id_hash, user_id, expires_at) VALUES (sha256('s'), $1, now())`,
		`INSERT INTO password_reset_tokens (token_hash, user_id, expires_at) VALUES (sha256('r'), $1, now())`,
		`INSERT INTO lockouts (account_key, user_id, level, failures, locked_at, locked_until) VALUES ('carol@example.com', $1, 1, 5, now(), now() + interval '1 minute')`,
		`INSERT INTO security_events (kind, account_key, user_id) VALUES ('login_failed', 'carol@example.com', $1)`,
	}
	for _, stmt := range setup {
		if _, err := conn.Exec(ctx, stmt, userID); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := conn.Exec(ctx, `DELETE FROM users WHERE id = $1`, userID); err != nil {
		t.Fatalf("delete user: %v", err)
	}

	tests := []struct {
		name  string
		query string
		want  int
	}{
		{"sessions are deleted", `SELECT count(*) FROM sessions`, 0},
		{"reset tokens are deleted", `SELECT count(*) FROM password_reset_tokens`, 0},
		{"lockouts stay without the user", `SELECT count(*) FROM lockouts WHERE user_id IS NULL AND account_key = 'carol@example.com'`, 1},
		{"events stay with the user id", `SELECT count(*) FROM security_events WHERE user_id = ` + strconv.FormatInt(userID, 10), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got int
			if err := conn.QueryRow(ctx, tt.query).Scan(&got); err != nil {
				t.Fatalf("%s: %v", tt.query, err)
			}
			if got != tt.want {
				t.Errorf("%s = %d, want %d", tt.query, got, tt.want)
			}
		})
	}
}

func TestEnsureDatabase(t *testing.T) {
	ctx := t.Context()

	t.Run("creates a missing database", func(t *testing.T) {
		name, dbURL := unusedDatabase(t)
		if err := migrations.EnsureDatabase(ctx, dbURL); err != nil {
			t.Fatalf("EnsureDatabase: %v", err)
		}
		if !databaseExists(t, name) {
			t.Errorf("database %s does not exist after EnsureDatabase", name)
		}
		if err := migrations.EnsureDatabase(ctx, dbURL); err != nil {
			t.Errorf("EnsureDatabase on an existing database: %v", err)
		}
	})

	t.Run("concurrent callers all succeed", func(t *testing.T) {
		name, dbURL := unusedDatabase(t)
		const callers = 4
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() { errs[i] = migrations.EnsureDatabase(ctx, dbURL) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("caller %d: EnsureDatabase: %v", i, err)
			}
		}
		if !databaseExists(t, name) {
			t.Errorf("database %s does not exist after EnsureDatabase", name)
		}
	})

	// A database that exists is found by connecting to it, without the
	// server's maintenance databases, which a user with rights on its own
	// database alone may not reach (CONNECT revoked from PUBLIC, a
	// PgBouncer that lists XCloak's database alone).
	t.Run("an existing database needs no other", func(t *testing.T) {
		dbURL := testenv.Postgres(t)
		// Names no server has: a connection to either fails.
		restore := migrations.SetMaintenanceDatabases([]string{"xcloak_no_such_database_a", "xcloak_no_such_database_b"})
		defer restore()
		if err := migrations.EnsureDatabase(ctx, dbURL); err != nil {
			t.Errorf("EnsureDatabase of a database that exists: %v", err)
		}
		_, missing := unusedDatabase(t)
		if err := migrations.EnsureDatabase(ctx, missing); err == nil || !strings.Contains(err.Error(), "xcloak_no_such_database_b") {
			t.Errorf("EnsureDatabase of a missing database, no maintenance database to create it from: %v, want an error naming the last tried", err)
		}
	})

	t.Run("bad URL is an error", func(t *testing.T) {
		err := migrations.EnsureDatabase(ctx, "postgres://user:secret@127.0.0.1:notaport/x")
		if err == nil {
			t.Fatal("EnsureDatabase with a bad port: got nil error")
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q shows the password", err)
		}
	})
}

// latestVersion is the highest version among the migration files, so the
// tests need no change when a migration is added.
func latestVersion(t *testing.T) int64 {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var latest int64
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		if !ok || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		v, err := strconv.ParseInt(prefix, 10, 64)
		if err != nil {
			t.Fatalf("migration %s: version %q is not a number", e.Name(), prefix)
		}
		latest = max(latest, v)
	}
	if latest == 0 {
		t.Fatal("no migration files found")
	}
	return latest
}

func connect(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func appliedCount(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM goose_db_version").Scan(&n); err != nil {
		t.Fatalf("count applied migrations: %v", err)
	}
	return n
}

func sqlState(err error) string {
	if err == nil {
		return ""
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return "not a Postgres error: " + err.Error()
}

// adminURL is the test server's URL naming the "postgres" database.
func adminURL(t *testing.T) string {
	t.Helper()
	return withDatabase(t, testenv.DatabaseURL(), "postgres")
}

// unusedDatabase returns a random database name that does not exist and a URL
// naming it on the test server; the database is dropped when the test ends.
func unusedDatabase(t *testing.T) (name, dbURL string) {
	t.Helper()
	name = "xcloak_ensure_" + rand.Text()[:12]
	name = strings.ToLower(name)
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), adminURL(t))
		if err != nil {
			t.Errorf("connect to drop %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return name, withDatabase(t, testenv.DatabaseURL(), name)
}

func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	conn := connect(t, adminURL(t))
	var exists bool
	err := conn.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	if err != nil {
		t.Fatalf("look up database %s: %v", name, err)
	}
	return exists
}

// withDatabase replaces the database in a URL or keyword/value connection string.
func withDatabase(t *testing.T, raw, name string) string {
	t.Helper()
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		return raw + " dbname=" + name
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("test database URL does not parse")
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}

// TestComposeEmails: migration 00021 stores each decomposed address
// composed (NFC), as addresses are now normalised, so that its account is
// still found by it; one whose composed address is another account's, or
// that composes as another decomposed one does, keeps its own.
func TestComposeEmails(t *testing.T) {
	ctx := t.Context()
	conn := migrated(t)
	const (
		renee      = "rene\u0301e@example.com" // é as e and a combining acute
		reneeNFC   = "ren\u00e9e@example.com"
		zoe        = "zoe\u0308@example.com" // composed, another account's
		zoeNFC     = "zo\u00eb@example.com"
		twin1      = "a\u0301@example.com" // both compose to á@: U+0341 is U+0301
		twin2      = "a\u0341@example.com"
		alreadyNFC = "ann@example.com"
	)
	for _, email := range []string{renee, zoe, zoeNFC, twin1, twin2, alreadyNFC} {
		if _, err := conn.Exec(ctx, `INSERT INTO users (email, password_hash) VALUES ($1, 'h')`, email); err != nil {
			t.Fatalf("insert %q: %v", email, err)
		}
	}
	up, err := os.ReadFile("00021_compose_emails.sql")
	if err != nil {
		t.Fatal(err)
	}
	sql := string(up)
	sql = sql[strings.Index(sql, "-- +goose StatementBegin"):strings.Index(sql, "-- +goose StatementEnd")]
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("the migration's Up: %v", err)
	}
	rows, err := conn.Query(ctx, `SELECT email FROM users ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{reneeNFC, zoe, zoeNFC, twin1, twin2, alreadyNFC}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("addresses after the migration: %q, want %q", got, want)
	}
}

// TestPoolSettingsInTheURL: the URL the service's pool reads may set the
// pool's own parameters (pool_max_conns, docs/DEPLOY.md), which are no
// Postgres setting; creating and migrating the database must not send
// them to the server, which refuses to start a session with them.
func TestPoolSettingsInTheURL(t *testing.T) {
	ctx := t.Context()
	_, dbURL := unusedDatabase(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "8")
	q.Set("pool_min_conns", "1")
	u.RawQuery = q.Encode()
	if err := migrations.EnsureDatabase(ctx, u.String()); err != nil {
		t.Fatalf("EnsureDatabase: %v", err)
	}
	if _, err := migrations.Up(ctx, u.String()); err != nil {
		t.Fatalf("Up: %v", err)
	}
}

// TestUpWaitsForTheLockThenSaysWhy: an instance that waits its whole time
// for the migration lock another session holds fails saying so, not with
// the bare words of the lock's library, so that an operator knows another
// instance may be migrating.
func TestUpWaitsForTheLockThenSaysWhy(t *testing.T) {
	defer migrations.SetLockWait(2)()
	dbURL := testenv.Postgres(t)
	holder := connect(t, dbURL)
	if _, err := holder.Exec(t.Context(), "SELECT pg_advisory_lock($1)", lock.DefaultLockID); err != nil {
		t.Fatal(err)
	}
	_, err := migrations.Up(t.Context(), dbURL)
	if err == nil {
		t.Fatal("Up while another session holds the migration lock: no error")
	}
	if !strings.Contains(err.Error(), "another instance") || !strings.Contains(err.Error(), "pg_locks") {
		t.Errorf("Up while another session holds the migration lock: %v; want it to name another instance and pg_locks", err)
	}
	if _, err := holder.Exec(t.Context(), "SELECT pg_advisory_unlock($1)", lock.DefaultLockID); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Up(t.Context(), dbURL); err != nil {
		t.Fatalf("Up once the lock is free: %v", err)
	}
}
