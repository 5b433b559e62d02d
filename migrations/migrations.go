package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// Latest is the schema version of the last migration this build holds.
// A database at a higher one was migrated by a newer build: [Up] leaves
// it as it is, as during a rolling update, where the replicas not yet
// replaced run on the schema the new ones migrated.
func Latest() int64 {
	entries, _ := fs.ReadDir(files, ".")
	var latest int64
	for _, e := range entries {
		prefix, _, _ := strings.Cut(e.Name(), "_")
		if v, err := strconv.ParseInt(prefix, 10, 64); err == nil {
			latest = max(latest, v)
		}
	}
	return latest
}

// Postgres error codes this package reacts to.
const (
	codeDuplicateDatabase = "42P04" // CREATE DATABASE lost a race to another creator
	codeUniqueViolation   = "23505" // the same race, caught by pg_database's unique index
	codeObjectInUse       = "55006" // template1 is briefly in use by another session
	codeInvalidCatalog    = "3D000" // the maintenance database does not exist
)

// EnsureDatabase creates the database that databaseURL names when it does not
// exist yet. It connects to that database first; only when the server says
// it does not exist does it connect to the same server's "postgres"
// database (or "template1" where there is none) with the same user, which
// needs the CREATEDB privilege then. A user with rights on its own database
// alone, or a pooler that serves that database alone, so starts against a
// database that exists.
//
// Concurrent callers are safe: losing the race to create the database counts
// as success.
func EnsureDatabase(ctx context.Context, databaseURL string) error {
	cfg, err := parseConfig(databaseURL)
	if err != nil {
		return err
	}
	name := cfg.Database
	if name == "" {
		return errors.New("database URL names no database")
	}

	own, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		_ = own.Close(context.WithoutCancel(ctx))
		return nil
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != codeInvalidCatalog {
		return fmt.Errorf("connect to Postgres at %s:%d as %q: %w", cfg.Host, cfg.Port, cfg.User, err)
	}

	admin, err := connectMaintenance(ctx, cfg)
	if err != nil {
		return err
	}
	defer admin.Close(context.WithoutCancel(ctx))

	// Looked up again: another instance may have created it meanwhile.
	var exists bool
	err = admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	if err != nil {
		return fmt.Errorf("look up database %q: %w", name, err)
	}
	if exists {
		return nil
	}

	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	for {
		_, err = admin.Exec(ctx, create)
		var pgErr *pgconn.PgError
		if err == nil {
			return nil
		}
		if !errors.As(err, &pgErr) {
			return fmt.Errorf("create database %q: %w", name, err)
		}
		switch pgErr.Code {
		case codeDuplicateDatabase, codeUniqueViolation:
			return nil
		case codeObjectInUse:
			// Postgres will not copy template1 while another session is
			// connected to it; such sessions are short, so try again.
			select {
			case <-ctx.Done():
				return fmt.Errorf("create database %q: %w", name, err)
			case <-time.After(100 * time.Millisecond):
			}
		default:
			return fmt.Errorf("create database %q: %w", name, err)
		}
	}
}

// parseConfig reads databaseURL as the service's pool does, which takes
// its own parameters (pool_max_conns and the like) out: pgx alone would
// send them to the server as settings, and Postgres refuses a session
// that names a setting it does not know.
func parseConfig(databaseURL string) (*pgx.ConnConfig, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	return cfg.ConnConfig, nil
}

// maintenanceDatabases are the databases connectMaintenance tries, in
// order.
var maintenanceDatabases = []string{"postgres", "template1"}

// connectMaintenance connects to the server of cfg through a database that
// every installation has.
func connectMaintenance(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	var err error
	for _, db := range maintenanceDatabases {
		admin := cfg.Copy()
		admin.Database = db
		var conn *pgx.Conn
		conn, err = pgx.ConnectConfig(ctx, admin)
		if err == nil {
			return conn, nil
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != codeInvalidCatalog {
			break
		}
	}
	return nil, fmt.Errorf("connect to Postgres at %s:%d as %q: %w", cfg.Host, cfg.Port, cfg.User, err)
}

// lockPolls is how many times, a second apart, Up tries the migration lock
// before it gives up.
var lockPolls uint64 = 300

// patientLocker is the goose session locker whose failure to get the lock
// in time says why: the library's own "failed to acquire lock" leaves an
// operator guessing that another instance holds it, still migrating (a
// long index build) or stuck.
type patientLocker struct {
	lock.SessionLocker
	polls uint64
}

func (l patientLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	err := l.SessionLocker.SessionLock(ctx, conn)
	if err != nil && ctx.Err() == nil && !isPgError(err) {
		return fmt.Errorf("another instance has held the migration lock (Postgres advisory lock %d) "+
			"for the %d s this one waited: it may still be migrating (start again once it is done), "+
			"or a session holding it is stuck (see pg_locks): %w", lock.DefaultLockID, l.polls, err)
	}
	return err
}

// isPgError reports whether err holds an error the server answered, as
// when the lock could not even be asked for.
func isPgError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}

// Up applies every migration that the database at databaseURL has not seen
// and returns the schema version it ends at. A database that is already up to
// date is left alone. A Postgres advisory lock keeps concurrent callers from
// applying the same migration twice: the later one waits, then finds nothing
// to do.
func Up(ctx context.Context, databaseURL string) (version int64, err error) {
	cfg, err := parseConfig(databaseURL)
	if err != nil {
		return 0, err
	}
	db := stdlib.OpenDB(*cfg)
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close database: %w", cerr)
		}
	}()

	// Poll the lock every second for up to five minutes; the default polls
	// every five seconds, which makes a second instance start slowly.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, lockPolls))
	if err != nil {
		return 0, fmt.Errorf("migration lock: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithSessionLocker(patientLocker{locker, lockPolls}),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return 0, fmt.Errorf("load migrations: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return 0, fmt.Errorf("apply migrations: %w", err)
	}
	version, err = provider.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return version, nil
}
