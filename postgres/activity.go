package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
)

// defaultActivityStep is about how many events of an account the first
// step of AccountActivity reads, each next one twice as many: an account
// under a long attack holds a retention's worth of failures (200,000 in
// BenchmarkAccountActivity), and a page reads its newest hours, not all
// of them, in a few steps even where an hour holds thousands.
const defaultActivityStep = 500

// AccountActivity lists account userID's events of kinds since it was
// created, newest first, after before, at most limit; the failed sign-ins
// of one network in one UTC hour are one entry, at the last of them, whose
// count adds up the rows' own counts (a summary row of the event budget
// stands for several); a sign-in whose detail has device=new is marked
// NewDevice. It reads security_events_user_id_at_idx back from before's
// hour in steps of whole hours, each down to the hour of the n-th newest
// event left (n from s.activityStep, doubled each step), so that no entry
// is split between steps, until the page is full or the events run out.
func (s *Store) AccountActivity(ctx context.Context, userID int64, kinds []string, before auth.ActivityCursor, limit int) ([]auth.Activity, error) {
	var at, until *time.Time
	if !before.At.IsZero() {
		at = &before.At
		// The cursor's hour is read whole: its entries past the cursor
		// are left out by the cursor itself.
		end := before.At.UTC().Truncate(time.Hour).Add(time.Hour)
		until = &end
	}
	var out []auth.Activity
	for n := s.activityStep; len(out) < limit; n *= 2 {
		from, err := s.activityStepStart(ctx, userID, kinds, until, n)
		if err != nil {
			return nil, fmt.Errorf("%w: listing activity: %w", auth.ErrUnavailable, err)
		}
		step, err := s.activityEntries(ctx, userID, kinds, from, until, at, before.ID, limit-len(out))
		if err != nil {
			return nil, fmt.Errorf("%w: listing activity: %w", auth.ErrUnavailable, err)
		}
		out = append(out, step...)
		if from == nil {
			break
		}
		until = from
	}
	return out, nil
}

// activityStepStart returns the start of the UTC hour of account userID's
// n-th newest event of kinds before until (nil: the newest), or nil if
// there are fewer: the step reads them all.
func (s *Store) activityStepStart(ctx context.Context, userID int64, kinds []string, until *time.Time, n int) (*time.Time, error) {
	var at time.Time
	err := s.pool.QueryRow(ctx, `
		SELECT e.at FROM security_events e JOIN users u ON u.id = e.user_id
		WHERE e.user_id = $1 AND e.at >= u.created_at AND e.kind = ANY($2::text[])
			AND ($3::timestamptz IS NULL OR e.at < $3)
		ORDER BY e.at DESC, e.id DESC OFFSET $4 - 1 LIMIT 1`,
		userID, kinds, until, n).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	from := at.UTC().Truncate(time.Hour)
	return &from, nil
}

// activityEntries lists AccountActivity's entries among account userID's
// events of kinds from from to until (nil: without that bound) after the
// cursor (at, id), at most limit.
func (s *Store) activityEntries(ctx context.Context, userID int64, kinds []string, from, until, at *time.Time, id int64, limit int) ([]auth.Activity, error) {
	rows, err := s.pool.Query(ctx, `
		WITH mine AS (
			SELECT e.id, e.at, e.kind, coalesce(e.ip, '') AS ip, e.detail
			FROM security_events e JOIN users u ON u.id = e.user_id
			WHERE e.user_id = $1 AND e.at >= u.created_at AND e.kind = ANY($2::text[])
				AND ($3::timestamptz IS NULL OR e.at >= $3) AND ($4::timestamptz IS NULL OR e.at < $4)
		), entries AS (
			SELECT id, at, kind, ip, 1 AS n, coalesce(detail->>'device' = 'new', false) AS new_device,
				coalesce(detail->>'browser', '') AS browser
			FROM mine WHERE kind <> $5
			UNION ALL
			SELECT max(id), max(at), $5, ip,
				sum(CASE WHEN detail->>'count' ~ '^[0-9]{1,6}$' THEN (detail->>'count')::int ELSE 1 END), false, ''
			FROM mine WHERE kind = $5
			GROUP BY ip, date_trunc('hour', at AT TIME ZONE 'UTC')
		)
		SELECT id, at, kind, ip, n, new_device, browser FROM entries
		WHERE $6::timestamptz IS NULL OR (at, id) < ($6, $7)
		ORDER BY at DESC, id DESC LIMIT $8`,
		userID, kinds, from, until, auth.EventLoginFailed, at, id, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (auth.Activity, error) {
		var a auth.Activity
		var n int64
		err := row.Scan(&a.ID, &a.At, &a.Kind, &a.Network, &n, &a.NewDevice, &a.Browser)
		a.Count = int(n)
		return a, err
	})
}
