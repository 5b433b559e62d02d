package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/xcloak/xcloak/auth"
)

// AddAPIKey implements auth.AppStore. A key for another key's
// application is stored only while one, in force or revoked, has it; a
// key for its own name's, asked for as "", only while no key of another
// name in force speaks for it. (A key in force of its own name is left to
// the unique index, which says ErrAPIKeyExists.)
func (s *Store) AddAPIKey(ctx context.Context, name, app string, hash []byte, at time.Time) (auth.APIKey, error) {
	k := auth.APIKey{Name: name, App: name, CreatedAt: at}
	var err error
	switch app {
	case "":
		err = s.pool.QueryRow(ctx, `INSERT INTO api_keys (name, hash, created_at)
			SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM api_keys WHERE app = $1 AND name <> $1 AND revoked_at IS NULL)
			RETURNING id`, name, hash, at).Scan(&k.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return auth.APIKey{}, auth.ErrAppInUse
		}
	case name:
		err = s.pool.QueryRow(ctx, `INSERT INTO api_keys (name, hash, created_at) VALUES ($1, $2, $3) RETURNING id`,
			name, hash, at).Scan(&k.ID)
	default:
		k.App = app
		err = s.pool.QueryRow(ctx, `INSERT INTO api_keys (name, app, hash, created_at)
			SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM api_keys WHERE `+appOf+` = $2)
			RETURNING id`, name, app, hash, at).Scan(&k.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return auth.APIKey{}, auth.ErrNoApp
		}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "api_keys_live_name_idx" {
		return auth.APIKey{}, auth.ErrAPIKeyExists
	}
	return k, err
}

// appOf is a key's application in SQL: its own name unless it names
// another's.
const appOf = `coalesce(app, name)`

// APIKeys implements auth.AppStore.
func (s *Store) APIKeys(ctx context.Context) ([]auth.APIKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, name, `+appOf+`, created_at, revoked_at, last_used_at FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (auth.APIKey, error) {
		var k auth.APIKey
		var revoked, used *time.Time
		err := r.Scan(&k.ID, &k.Name, &k.App, &k.CreatedAt, &revoked, &used)
		if revoked != nil {
			k.RevokedAt = *revoked
		}
		if used != nil {
			k.LastUsedAt = *used
		}
		return k, err
	})
}

// RevokeAPIKey implements auth.AppStore.
func (s *Store) RevokeAPIKey(ctx context.Context, name string, at time.Time) (auth.APIKey, error) {
	k := auth.APIKey{Name: name}
	var used *time.Time
	err := s.pool.QueryRow(ctx, `UPDATE api_keys SET revoked_at = $2 WHERE name = $1 AND revoked_at IS NULL
		RETURNING id, `+appOf+`, created_at, revoked_at, last_used_at`, name, at).Scan(&k.ID, &k.App, &k.CreatedAt, &k.RevokedAt, &used)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.APIKey{}, auth.ErrNoAPIKey
	}
	if err != nil {
		return auth.APIKey{}, err
	}
	if used != nil {
		k.LastUsedAt = *used
	}
	return k, nil
}

// ActiveAPIKeys implements auth.AppStore.
func (s *Store) ActiveAPIKeys(ctx context.Context) ([]auth.APIKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, name, `+appOf+`, hash, created_at FROM api_keys WHERE revoked_at IS NULL`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (auth.APIKey, error) {
		var k auth.APIKey
		err := r.Scan(&k.ID, &k.Name, &k.App, &k.Hash, &k.CreatedAt)
		return k, err
	})
}

// TouchAPIKeys implements auth.AppStore.
func (s *Store) TouchAPIKeys(ctx context.Context, ids []int64, at time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE api_keys SET last_used_at = $2 WHERE id = ANY($1)
		AND (last_used_at IS NULL OR last_used_at < $2)`, ids, at)
	return err
}
