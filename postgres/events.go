package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
)

// InsertEvents writes a batch of security events with one COPY, which
// either writes all of them or none. A rejection's rule is kept in its
// detail ("rule"), where the dashboard's listing finds it.
func (s *Store) InsertEvents(ctx context.Context, batch []auth.Event) error {
	_, err := s.pool.CopyFrom(ctx, pgx.Identifier{"security_events"},
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
