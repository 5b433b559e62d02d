package auth

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bounds of what the dashboard shows.
const (
	// DashboardTop is how many sources and accounts each ranking lists.
	DashboardTop = 10
	// DashboardLockouts is how many active lockouts the dashboard lists;
	// Summary.ActiveLockouts counts them all.
	DashboardLockouts = 100
	// MaxEventsPage bounds one page of Events.
	MaxEventsPage = 100
)

// Dashboard is everything the security dashboard shows about a period,
// from the stores every replica shares: counters from Redis, lockouts from
// Postgres.
type Dashboard struct {
	Snapshot
	// AsOf is when the figures were read.
	AsOf time.Time
	// Lockouts are the lockouts in force, newest first, at most
	// DashboardLockouts (Summary.ActiveLockouts counts them all).
	Lockouts []Lockout
	// Degraded reports that Redis is unreachable and limits follow
	// FailurePolicy.
	Degraded      bool
	FailurePolicy string
	// CountersUnavailable reports that the counters could not be read
	// (Redis is down); the figures are then zero, and the lockouts and
	// events from Postgres are still shown.
	CountersUnavailable bool
}

// Dashboard gathers the figures of period p as of now.
func (s *Service) Dashboard(ctx context.Context, p Period) (Dashboard, error) {
	if !p.valid() {
		return Dashboard{}, ErrInvalidPeriod
	}
	now := s.now()
	d := Dashboard{AsOf: now, Degraded: s.limits.Degraded(), FailurePolicy: string(s.limits.Policy())}
	snap, err := s.stats.Snapshot(ctx, p, now, DashboardTop)
	if err != nil {
		// Without Redis the team still needs the lockouts and events.
		s.log.WarnContext(ctx, "dashboard: reading counters", "err", err)
		d.CountersUnavailable = true
		snap = Snapshot{Summary: Summary{Period: p, RejectedByRule: map[string]int64{}}}
	}
	d.Snapshot = snap
	if d.Lockouts, err = s.ActiveLockouts(ctx, DashboardLockouts); err != nil {
		return Dashboard{}, err
	}
	if d.Summary.ActiveLockouts, err = s.countActiveLockouts(ctx); err != nil {
		return Dashboard{}, err
	}
	return d, nil
}

// countActiveLockouts counts the accounts ActiveLockouts would list
// without a limit.
func (s *Service) countActiveLockouts(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRow(ctx,
		`SELECT count(DISTINCT account_key) FROM lockouts WHERE cleared_at IS NULL AND locked_until > $1`,
		s.now()).Scan(&n)
	if err != nil {
		return 0, unavailable("counting lockouts", err)
	}
	return n, nil
}

// DashboardEventKinds are the events the dashboard lists: what a security
// team acts on, not the flood of individual sign-ins that the counters
// already sum up.
var DashboardEventKinds = []string{EventLockout, EventUnlock, EventResetRequested, EventResetCompleted, EventNewDevice,
	EventUnlockConfirmed, EventSignedOutEverywhere}

// EventFilter selects a page of stored security events.
type EventFilter struct {
	// Kinds are the event kinds to list; empty means DashboardEventKinds.
	Kinds []string
	// BeforeID continues a listing after the event with that ID (the last
	// one of the previous page); 0 starts with the newest.
	BeforeID int64
	// Limit is the page size, 1 to MaxEventsPage.
	Limit int
}

// StoredEvent is one security event as Postgres keeps it.
type StoredEvent struct {
	ID      int64
	At      time.Time
	Kind    string
	Account string // "" if none
	UserID  int64  // 0 if no account
	Source  string // "" if none
	Detail  map[string]string
}

// Events lists security events newest first (by time, then ID), one page
// at a time: pass the last ID of a page as BeforeID for the next. The
// listing is by key, not offset, so a page costs the same however deep it
// is and new events do not shift later pages.
func (s *Service) Events(ctx context.Context, f EventFilter) ([]StoredEvent, error) {
	if f.Limit < 1 || f.Limit > MaxEventsPage || f.BeforeID < 0 {
		return nil, fmt.Errorf("%w: events page of %d from %d", ErrInvalidRequest, f.Limit, f.BeforeID)
	}
	kinds := f.Kinds
	if len(kinds) == 0 {
		kinds = DashboardEventKinds
	}
	// One index range per kind (security_events_kind_at_idx), merged: the
	// kinds listed are a trickle beside the sign-in events, so scanning
	// all events by time would read mostly rows that are thrown away.
	const columns = `e.id, e.at, e.kind, coalesce(e.account_key, ''), coalesce(e.user_id, 0), coalesce(e.ip, ''), e.detail`
	var rows pgx.Rows
	var err error
	if f.BeforeID == 0 {
		rows, err = s.db.Query(ctx, `
			SELECT `+columns+` FROM unnest($1::text[]) AS k(kind)
			CROSS JOIN LATERAL (
				SELECT * FROM security_events s WHERE s.kind = k.kind
				ORDER BY s.at DESC, s.id DESC LIMIT $2
			) e
			ORDER BY e.at DESC, e.id DESC LIMIT $2`, kinds, f.Limit)
	} else {
		rows, err = s.db.Query(ctx, `
			WITH cursor AS (SELECT at, id FROM security_events WHERE id = $3)
			SELECT `+columns+` FROM cursor, unnest($1::text[]) AS k(kind)
			CROSS JOIN LATERAL (
				SELECT * FROM security_events s WHERE s.kind = k.kind AND (s.at, s.id) < (cursor.at, cursor.id)
				ORDER BY s.at DESC, s.id DESC LIMIT $2
			) e
			ORDER BY e.at DESC, e.id DESC LIMIT $2`, kinds, f.Limit, f.BeforeID)
	}
	if err != nil {
		return nil, unavailable("listing events", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StoredEvent, error) {
		var e StoredEvent
		var detail map[string]any
		if err := row.Scan(&e.ID, &e.At, &e.Kind, &e.Account, &e.UserID, &e.Source, &detail); err != nil {
			return e, err
		}
		// Details are written as strings; anything else is shown as text
		// rather than failing the listing.
		e.Detail = make(map[string]string, len(detail))
		for k, v := range detail {
			if s, ok := v.(string); ok {
				e.Detail[k] = s
			} else {
				e.Detail[k] = fmt.Sprint(v)
			}
		}
		return e, nil
	})
	if err != nil {
		return nil, unavailable("listing events", err)
	}
	return out, nil
}
