package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/xcloak/xcloak/auth"
)

// accountStore creates and removes a distributed run's accounts straight in
// the target's Postgres: ten thousand accounts through the service would be
// ten thousand argon2id hashes, when the run needs one per distinct
// password.
type accountStore struct {
	pool *pgxpool.Pool
}

// openAccounts connects to c.databaseURL, whose host must pass the loopback
// check (a Unix socket is local by definition).
func openAccounts(ctx context.Context, c distConfig) (*accountStore, error) {
	cfg, err := pgxpool.ParseConfig(c.databaseURL)
	if err != nil {
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	hosts := []string{cfg.ConnConfig.Host}
	for _, f := range cfg.ConnConfig.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	for _, h := range hosts {
		if strings.HasPrefix(h, "/") {
			continue
		}
		if _, err := resolveHost(ctx, h, c.allow); err != nil {
			return nil, fmt.Errorf("--database-url: %w", err)
		}
	}
	cfg.ConnConfig.DialFunc = guardedDialer{allow: c.allow}.DialContext
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("reaching the database at %s: %w", cfg.ConnConfig.Host, err)
	}
	return &accountStore{pool: pool}, nil
}

func (s *accountStore) close() { s.pool.Close() }

// create inserts the plan's accounts and its admin, hashing each distinct
// password once with XCloak's default argon2id parameters, as the server
// would. It fails if any of the run's addresses is taken already.
func (s *accountStore) create(ctx context.Context, c distConfig, p plan) error {
	passwords := append([]string{p.adminPassword}, p.passwords...)
	slices.Sort(passwords)
	passwords = slices.Compact(passwords)
	distinct := make(map[string]string, len(passwords))
	hasher, err := auth.NewHasher(auth.DefaultParams, runtime.GOMAXPROCS(0), time.Minute)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, pw := range passwords {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			h, err := hasher.Hash(ctx, pw)
			mu.Lock()
			defer mu.Unlock()
			distinct[pw], errs = h, append(errs, err)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("hashing the accounts' passwords: %w", err)
	}

	rows := make([][]any, 0, c.accounts+1)
	add := func(email, password string, admin bool) error {
		e, err := auth.NormaliseEmail(email)
		if err != nil {
			return err
		}
		rows = append(rows, []any{e, distinct[password], admin})
		return nil
	}
	if err := add(c.adminEmail(), p.adminPassword, true); err != nil {
		return err
	}
	for i, pw := range p.passwords {
		if err := add(c.email(i), pw, false); err != nil {
			return err
		}
	}
	n, err := s.pool.CopyFrom(ctx, pgx.Identifier{"users"}, []string{"email", "password_hash", "is_admin"}, pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("creating the accounts (is --tag %s used by an earlier run kept with --keep-accounts?): %w", c.tag, err)
	}
	if int(n) != len(rows) {
		return fmt.Errorf("created %d accounts, want %d", n, len(rows))
	}
	return nil
}

// backdate makes the sessions and devices the run's accounts have now an
// hour older. The returning users and the admin sign in moments before
// the attack, but stand for browsers known from before: as attack mode
// starts, XCloak signs out the browsers new to their accounts since its
// detector's window began (at most 30 minutes), which these are not meant
// to be. An hour stays well inside a session's life (XCLOAK_SESSION_TTL,
// which ends a session counted from when it was made).
func (s *accountStore) backdate(ctx context.Context, c distConfig) error {
	for _, table := range []string{"sessions", "devices"} {
		if _, err := s.pool.Exec(ctx, `UPDATE `+table+` SET created_at = created_at - interval '1 hour'
			WHERE user_id IN (SELECT id FROM users WHERE email LIKE $1)`, c.tag+"-%@example.com"); err != nil {
			return fmt.Errorf("backdating the returning users' %s: %w", table, err)
		}
	}
	return nil
}

// remove deletes the run's accounts; their sessions, devices and tokens go
// with them. Security events, which outlive accounts, stay.
func (s *accountStore) remove(ctx context.Context, c distConfig) error {
	// The tag is letters and digits, so the pattern has no other wildcard.
	_, err := s.pool.Exec(ctx, `DELETE FROM users WHERE email LIKE $1`, c.tag+"-%@example.com")
	return err
}
