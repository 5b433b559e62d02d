package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
)

// CountActiveLockouts counts the accounts auth.Service.ActiveLockouts
// would list at now without a limit: an account whose password and second
// step are both locked counts once, its second step's locks keyed by its
// address after auth.SecondStepLockPrefix and, for a held answer's or
// passkeys' alone, "held " or "passkey ".
func (s *Store) CountActiveLockouts(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx,
		`SELECT count(DISTINCT regexp_replace(account_key, '^mfa (held |passkey )?', ''))
		 FROM lockouts WHERE cleared_at IS NULL AND locked_until > $1`,
		now).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("%w: counting lockouts: %w", auth.ErrUnavailable, err)
	}
	return n, nil
}

// Events lists the security events f selects, newest first (by time, then
// ID); f must be valid (dashboard.Reader.Events checks it) and name its
// kinds.
func (s *Store) Events(ctx context.Context, f dashboard.EventFilter) ([]dashboard.StoredEvent, error) {
	kinds := f.Kinds
	// One index range per kind (security_events_kind_at_id_idx), merged: the
	// kinds listed are a trickle beside the sign-in events, so scanning
	// all events by time would read mostly rows that are thrown away.
	const columns = `e.id, e.at, e.kind, coalesce(e.account_key, ''), coalesce(e.user_id, 0), coalesce(e.ip, ''), e.detail`
	var rows pgx.Rows
	var err error
	if f.BeforeID == 0 {
		rows, err = s.pool.Query(ctx, `
			SELECT `+columns+` FROM unnest($1::text[]) AS k(kind)
			CROSS JOIN LATERAL (
				SELECT * FROM security_events s WHERE s.kind = k.kind
				ORDER BY s.at DESC, s.id DESC LIMIT $2
			) e
			ORDER BY e.at DESC, e.id DESC LIMIT $2`, kinds, f.Limit)
	} else {
		rows, err = s.pool.Query(ctx, `
			WITH cursor AS (SELECT at, id FROM security_events WHERE id = $3)
			SELECT `+columns+` FROM cursor, unnest($1::text[]) AS k(kind)
			CROSS JOIN LATERAL (
				SELECT * FROM security_events s WHERE s.kind = k.kind AND (s.at, s.id) < (cursor.at, cursor.id)
				ORDER BY s.at DESC, s.id DESC LIMIT $2
			) e
			ORDER BY e.at DESC, e.id DESC LIMIT $2`, kinds, f.Limit, f.BeforeID)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: listing events: %w", auth.ErrUnavailable, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (dashboard.StoredEvent, error) {
		var e dashboard.StoredEvent
		var detail map[string]any
		if err := row.Scan(&e.ID, &e.At, &e.Kind, &e.Account, &e.UserID, &e.Source, &detail); err != nil {
			return e, err
		}
		e.Detail = storedDetail(detail)
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: listing events: %w", auth.ErrUnavailable, err)
	}
	return out, nil
}

// storedDetail reads an event's detail. Details are written as strings;
// anything else is shown as text rather than failing the listing.
func storedDetail(detail map[string]any) map[string]string {
	out := make(map[string]string, len(detail))
	for k, v := range detail {
		if s, ok := v.(string); ok {
			out[k] = s
		} else {
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}
