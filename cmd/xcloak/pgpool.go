package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// sessionBounds are the settings each connection of the service's pool
// is given, unless something set them already (the database URL, the
// role's or the database's settings, the server's configuration): a statement waiting
// behind a lock (an operator's LOCK, another version's migration, a hung
// transaction) or running away would otherwise hold one of the pool's few
// connections for as long as its caller waits, and enough of them stall
// every sign-in. A statement they end fails as Postgres being unavailable
// (auth.ErrUnavailable). The migrations, on a pool of their own, are not
// bounded: an index build may take long.
var sessionBounds = []struct{ name, value string }{
	{"statement_timeout", "30s"},
	{"lock_timeout", "10s"},
	{"idle_in_transaction_session_timeout", "60s"},
}

// poolConfig is the configuration of the service's pool on the database
// URL raw, and what checkDatabaseURL checks, so that the two agree: pgx's
// reading of it, each new connection then given sessionBounds.
func poolConfig(raw string) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(raw)
	if err != nil {
		return nil, err
	}
	pc.AfterConnect = boundSession
	return pc, nil
}

// boundSQL sets each of sessionBounds ($1, values $2) that still has the
// server's built-in default: what the URL sets, as a parameter or in
// options, comes from the client, and an operator's ALTER ROLE, ALTER
// DATABASE or postgresql.conf from those, and each is kept. Set once the session runs rather than sent
// at its start with the URL's parameters, which a pooler such as
// PgBouncer refuses ("unsupported startup parameter"); it outlasts a
// pooler's transactions only under session pooling, which XCloak needs
// anyway (docs/DEPLOY.md).
const boundSQL = `SELECT count(set_config(b.name, b.value, false))
	FROM unnest($1::text[], $2::text[]) AS b(name, value)
	JOIN pg_settings s ON s.name = b.name
	WHERE s.source = 'default'`

// boundSession gives conn, a new connection of the pool, sessionBounds.
func boundSession(ctx context.Context, conn *pgx.Conn) error {
	names := make([]string, len(sessionBounds))
	values := make([]string, len(sessionBounds))
	for i, b := range sessionBounds {
		names[i], values[i] = b.name, b.value
	}
	if _, err := conn.Exec(ctx, boundSQL, names, values); err != nil {
		return fmt.Errorf("setting statement_timeout, lock_timeout and idle_in_transaction_session_timeout: %w", err)
	}
	return nil
}
