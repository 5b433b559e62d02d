package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/xcloak/xcloak/auth"
)

// InsertEvents writes a batch of security events with one COPY, in one
// transaction with the batch's id in event_batches. A batch whose id is
// there already was written before (its answer lost): it is not written
// again, and InsertEvents succeeds, so that the batch's audit lines and
// hooks, which a lost answer kept from running, run now, once. A
// rejection's rule is kept in its detail ("rule"), where the dashboard's
// listing finds it.
//
// A batch Postgres refuses for what a row holds fails as
// auth.ErrEventsRefused, wrapping Postgres's error (see refusedForGood).
func (s *Store) InsertEvents(ctx context.Context, id auth.EventBatchID, batch []auth.Event) error {
	err := s.insertEvents(ctx, id, batch)
	if refusedForGood(err) {
		return fmt.Errorf("%w: %w", auth.ErrEventsRefused, err)
	}
	return err
}

// refusedForGood reports whether err is Postgres refusing the data it was
// given: a data exception (class 22: a NUL byte or invalid UTF-8 in text,
// a NUL in JSON, a value too long) or an integrity constraint violation
// (class 23: a check). The same rows are refused again at every try. Any
// other failure, the connection's (08), a serialization failure or
// deadlock (40), a lack of resources (53), an operator's intervention or
// a cancelled query (57), or no answer at all, may clear and is tried
// again as it was.
func refusedForGood(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	class := pgErr.Code[:min(2, len(pgErr.Code))]
	return class == "22" || class == "23"
}

func (s *Store) insertEvents(ctx context.Context, id auth.EventBatchID, batch []auth.Event) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// A first write still running (its client gone) holds the id:
		// this one waits for it, then finds the id, or writes the batch
		// if that one did not commit.
		tag, err := tx.Exec(ctx, `INSERT INTO event_batches (id) VALUES ($1) ON CONFLICT DO NOTHING`, id[:])
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		_, err = tx.CopyFrom(ctx, pgx.Identifier{"security_events"},
			[]string{"at", "kind", "account_key", "user_id", "ip", "detail"},
			pgx.CopyFromSlice(len(batch), func(i int) ([]any, error) {
				e := batch[i]
				detail := e.Detail
				if e.Rule != "" {
					detail = make(map[string]string, len(e.Detail)+1)
					for k, v := range e.Detail {
						detail[k] = v
					}
					detail["rule"] = e.Rule
				}
				if detail == nil {
					detail = map[string]string{}
				}
				return []any{e.At, e.Kind, textOrNull(e.Account), idOrNull(e.UserID), textOrNull(e.Source), detail}, nil
			}))
		return err
	})
}

// textOrNull stores "" as NULL.
func textOrNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// idOrNull stores the ID 0 (no account) as NULL.
func idOrNull(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}
