package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
)

// SearchEvents calls fn with each event q selects, newest first (by time,
// then ID). Only the filters q sets are in the query, so that the planner
// sees each one and reads its index (migrations 00009 and 00019): an
// account through security_events_account_key_at_id_idx, a kind through
// security_events_kind_at_id_idx, in the page's order, stopping at the
// limit.
//
// A network is searched in two parts (searchNetwork), since no index
// gives its events in the page's order and the planner cannot tell where
// in the log they are: reading the log in order until the page is full
// reads all of it for a network whose events are old (an attack weeks
// ago) or that the other filters exclude (the successful sign-ins of an
// attacking network, which are none).
func (s *Store) SearchEvents(ctx context.Context, q dashboard.EventSearch, fn func(dashboard.StoredEvent) error) error {
	if q.Network == "" {
		sql, args := searchQuery(q)
		return s.readEvents(ctx, sql, args, fn)
	}
	return s.searchNetwork(ctx, q, fn)
}

// networkWalk is how many of the events the other filters select a
// search by network reads in the page's order, checking each one's
// network, before it turns to the network's index: a millisecond or two
// of Postgres, in which a network with many of the recent log's events
// fills its page.
const networkWalk = 2000

// searchNetwork searches q, which has a network: the newest networkWalk
// events the other filters select are read in the page's order, checking
// each one's network; if they do not fill the page, the events older than
// them are found through security_events_network_idx (every event of
// the network, whatever their age) and sorted. A page costs at most the
// walk and the network's own events, never the whole log.
func (s *Store) searchNetwork(ctx context.Context, q dashboard.EventSearch, fn func(dashboard.StoredEvent) error) error {
	edge, full, err := s.walkEdge(ctx, q)
	if err != nil {
		return err
	}
	if !full {
		// The other filters select fewer events than the walk: read in
		// order, they are all read at most.
		sql, args := searchQuery(q)
		return s.readEvents(ctx, sql, args, fn)
	}
	found := 0
	sql, args := walkQuery(q, edge)
	if err := s.readEvents(ctx, sql, args, func(e dashboard.StoredEvent) error {
		found++
		return fn(e)
	}); err != nil {
		return err
	}
	if found == q.Limit {
		return nil
	}
	older := q
	older.Before, older.Limit = edge, q.Limit-found
	sql, args = networkFirstQuery(older)
	return s.readEvents(ctx, sql, args, fn)
}

// walkEdge returns the oldest of the networkWalk newest events that q's
// filters other than its network select (after q.Before), and whether
// there are that many.
func (s *Store) walkEdge(ctx context.Context, q dashboard.EventSearch) (dashboard.EventCursor, bool, error) {
	others := q
	others.Network = ""
	where, args := searchFilters(others, nil, nil)
	sql := "SELECT at, id FROM security_events" + where +
		" ORDER BY at DESC, id DESC OFFSET " + strconv.Itoa(networkWalk-1) + " LIMIT 1"
	var edge dashboard.EventCursor
	err := s.pool.QueryRow(ctx, sql, append([]any{customPlan}, args...)...).Scan(&edge.At, &edge.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return dashboard.EventCursor{}, false, nil
	}
	if err != nil {
		return dashboard.EventCursor{}, false, fmt.Errorf("%w: searching events: %w", auth.ErrUnavailable, err)
	}
	return edge, true, nil
}

// customPlan sends a search's statements unnamed, so that Postgres plans
// each one for its arguments: a statement prepared once may be given a
// generic plan after five runs, made for any network and any edge, which
// reads the log in order where a network's index would read a few rows.
const customPlan = pgx.QueryExecModeExec

// readEvents runs an event query and calls fn with each row.
func (s *Store) readEvents(ctx context.Context, sql string, args []any, fn func(dashboard.StoredEvent) error) error {
	rows, err := s.pool.Query(ctx, sql, append([]any{customPlan}, args...)...)
	if err != nil {
		return fmt.Errorf("%w: searching events: %w", auth.ErrUnavailable, err)
	}
	defer rows.Close()
	for rows.Next() {
		var e dashboard.StoredEvent
		var detail map[string]any
		if err := rows.Scan(&e.ID, &e.At, &e.Kind, &e.Account, &e.UserID, &e.Source, &detail); err != nil {
			return fmt.Errorf("%w: searching events: %w", auth.ErrUnavailable, err)
		}
		e.Detail = storedDetail(detail)
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: searching events: %w", auth.ErrUnavailable, err)
	}
	return nil
}

// eventColumns are the columns readEvents scans.
const eventColumns = `id, at, kind, coalesce(account_key, ''), coalesce(user_id, 0), coalesce(ip, ''), detail`

// searchQuery is the SQL and arguments of q's page, read in the page's
// order.
func searchQuery(q dashboard.EventSearch) (string, []any) {
	return pageQuery(q, nil)
}

// walkQuery is searchQuery limited to the events at or after edge: the
// walk of searchNetwork, which the condition bounds whatever the plan.
func walkQuery(q dashboard.EventSearch, edge dashboard.EventCursor) (string, []any) {
	return pageQuery(q, &edge)
}

func pageQuery(q dashboard.EventSearch, from *dashboard.EventCursor) (string, []any) {
	where, args := searchFilters(q, from, nil)
	args = append(args, q.Limit)
	return "SELECT " + eventColumns + " FROM security_events" + where +
		" ORDER BY at DESC, id DESC LIMIT $" + strconv.Itoa(len(args)), args
}

// networkFirstQuery is the SQL and arguments of q's page, which has a
// network, read through the network's index: its events (older than
// q.Before), materialised so that the planner can neither read the log in
// order nor take another filter's index, whose events may be any number
// of the log's; then the other filters, and the page's order, on those.
// Only their IDs and times are sorted; the page's rows are read after.
func networkFirstQuery(q dashboard.EventSearch) (string, []any) {
	network := dashboard.EventSearch{Network: q.Network, Before: q.Before}
	where, args := searchFilters(network, nil, nil)
	cond, args := searchFilters(dashboard.EventSearch{Account: q.Account, Kind: q.Kind}, nil, args)
	args = append(args, q.Limit)
	return `WITH matched AS MATERIALIZED (SELECT id, at, kind, account_key FROM security_events` + where + `),
		page AS (SELECT id FROM matched` + cond + ` ORDER BY at DESC, id DESC LIMIT $` + strconv.Itoa(len(args)) + `)
		SELECT ` + eventColumns + ` FROM security_events WHERE id IN (SELECT id FROM page)
		ORDER BY at DESC, id DESC`, args
}

// searchFilters is the WHERE clause (empty, or with a leading space) of
// q's filters and cursor, and args with their arguments appended, which
// its placeholders follow; with from, only the events at or after it too.
func searchFilters(q dashboard.EventSearch, from *dashboard.EventCursor, args []any) (string, []any) {
	var where []string
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if q.Account != "" {
		where = append(where, "account_key = "+arg(q.Account))
	}
	if q.Network != "" {
		// The very expression of security_events_network_idx, which
		// is NULL for an ip that is no network ("unknown"), so that no
		// row can fail the query. dashboard.Reader gives q.Network as
		// it parsed it, so its cast cannot.
		where = append(where, "security_event_network(ip) && "+arg(q.Network)+"::inet")
	}
	if q.Kind != "" {
		where = append(where, "kind = "+arg(q.Kind))
	}
	if q.Before.ID != 0 {
		where = append(where, "(at, id) < ("+arg(q.Before.At)+", "+arg(q.Before.ID)+")")
	}
	if from != nil {
		where = append(where, "(at, id) >= ("+arg(from.At)+", "+arg(from.ID)+")")
	}
	if len(where) == 0 {
		return "", args
	}
	return " WHERE " + strings.Join(where, " AND "), args
}
