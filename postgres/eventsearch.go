package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
)

// SearchEvents calls fn with each event q selects, newest first (by time,
// then ID). Only the filters q sets are in the query, so that the planner
// sees each one and reads its index (migrations 00009 and 00019): an
// account through security_events_account_key_at_id_idx, a kind through
// security_events_kind_at_id_idx, in the page's order, stopping at the
// limit; a network through security_events_network_idx, every event whose
// network overlaps q's (the addresses and networks inside it, the wider
// ones that hold it), or, when those are many, in the page's order
// through security_events_at_id_idx.
func (s *Store) SearchEvents(ctx context.Context, q dashboard.EventSearch, fn func(dashboard.StoredEvent) error) error {
	sql, args := searchQuery(q)
	rows, err := s.pool.Query(ctx, sql, args...)
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

// searchQuery is the SQL and arguments of q.
func searchQuery(q dashboard.EventSearch) (string, []any) {
	var where []string
	var args []any
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
	sql := `SELECT id, at, kind, coalesce(account_key, ''), coalesce(user_id, 0), coalesce(ip, ''), detail
		FROM security_events`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	return sql + " ORDER BY at DESC, id DESC LIMIT " + arg(q.Limit), args
}
