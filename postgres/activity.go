package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
)

// AccountActivity lists account userID's events of kinds since it was
// created, newest first, after before, at most limit; the failed sign-ins
// of one network in one UTC hour are one entry, at the last of them, whose
// count adds up the rows' own counts (a summary row of the event budget
// stands for several); a sign-in whose detail has device=new is marked
// NewDevice. It reads security_events_user_id_at_idx.
func (s *Store) AccountActivity(ctx context.Context, userID int64, kinds []string, before auth.ActivityCursor, limit int) ([]auth.Activity, error) {
	var at *time.Time
	if !before.At.IsZero() {
		at = &before.At
	}
	rows, err := s.pool.Query(ctx, `
		WITH mine AS (
			SELECT e.id, e.at, e.kind, coalesce(e.ip, '') AS ip, e.detail
			FROM security_events e JOIN users u ON u.id = e.user_id
			WHERE e.user_id = $1 AND e.at >= u.created_at AND e.kind = ANY($2::text[])
		), entries AS (
			SELECT id, at, kind, ip, 1 AS n, coalesce(detail->>'device' = 'new', false) AS new_device,
				coalesce(detail->>'browser', '') AS browser
			FROM mine WHERE kind <> $3
			UNION ALL
			SELECT max(id), max(at), $3, ip,
				sum(CASE WHEN detail->>'count' ~ '^[0-9]{1,6}$' THEN (detail->>'count')::int ELSE 1 END), false, ''
			FROM mine WHERE kind = $3
			GROUP BY ip, date_trunc('hour', at AT TIME ZONE 'UTC')
		)
		SELECT id, at, kind, ip, n, new_device, browser FROM entries
		WHERE $4::timestamptz IS NULL OR (at, id) < ($4, $5)
		ORDER BY at DESC, id DESC LIMIT $6`,
		userID, kinds, auth.EventLoginFailed, at, before.ID, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: listing activity: %w", auth.ErrUnavailable, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (auth.Activity, error) {
		var a auth.Activity
		var n int64
		err := row.Scan(&a.ID, &a.At, &a.Kind, &a.Network, &n, &a.NewDevice, &a.Browser)
		a.Count = int(n)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: listing activity: %w", auth.ErrUnavailable, err)
	}
	return out, nil
}
