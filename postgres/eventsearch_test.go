package postgres_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/postgres"
)

// search collects what s.SearchEvents finds for q.
func search(t testing.TB, s *postgres.Store, q dashboard.EventSearch) []dashboard.StoredEvent {
	t.Helper()
	var out []dashboard.StoredEvent
	if err := s.SearchEvents(t.Context(), q, func(e dashboard.StoredEvent) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSearchEvents: each filter, alone and combined, finds exactly the
// events that match it, newest first, and pages by cursor follow one
// another without gaps or repeats, even among events of the same instant.
func TestSearchEvents(t *testing.T) {
	s := newStore(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	batch := []auth.Event{
		{At: t0, Kind: auth.EventLoginFailed, Account: "ann@example.com", Source: "192.0.2.1"},
		{At: t0.Add(time.Minute), Kind: auth.EventLoginFailed, Account: "ann@example.com", Source: "2001:db8:1:2::/64"},
		{At: t0.Add(time.Minute), Kind: auth.EventLockout, Account: "ann@example.com", Source: "2001:db8:1:2::/64"},
		{At: t0.Add(time.Minute), Kind: auth.EventLoginFailed, Account: "bob@example.com", Source: "192.0.2.1"},
		{At: t0.Add(2 * time.Minute), Kind: auth.EventLoginSucceeded, Account: "app shop 42", Source: "192.0.2.10"},
		{At: t0.Add(2 * time.Minute), Kind: auth.EventLoginFailed, Account: "app shop ann@example.com", Source: "192.0.2.11"},
		{At: t0.Add(3 * time.Minute), Kind: auth.EventAttackStarted},
	}
	if err := s.InsertEvents(t.Context(), auth.NewEventBatchID(), batch); err != nil {
		t.Fatal(err)
	}
	type event struct{ kind, account, source string }
	cases := []struct {
		account, network, kind string
		want                   []event
	}{
		{"  Ann@Example.COM ", "", "", []event{
			{auth.EventLockout, "ann@example.com", "2001:db8:1:2::/64"},
			{auth.EventLoginFailed, "ann@example.com", "2001:db8:1:2::/64"},
			{auth.EventLoginFailed, "ann@example.com", "192.0.2.1"}}},
		{"app shop 42", "", "", []event{{auth.EventLoginSucceeded, "app shop 42", "192.0.2.10"}}},
		// An application's account as its user typed it, folded as its
		// events keep it.
		{"app shop Ann@Example.com", "", "", []event{{auth.EventLoginFailed, "app shop ann@example.com", "192.0.2.11"}}},
		{"", "192.0.2.1", "", []event{
			{auth.EventLoginFailed, "bob@example.com", "192.0.2.1"},
			{auth.EventLoginFailed, "ann@example.com", "192.0.2.1"}}},
		{"", "192.0.2.1/32", "", []event{
			{auth.EventLoginFailed, "bob@example.com", "192.0.2.1"},
			{auth.EventLoginFailed, "ann@example.com", "192.0.2.1"}}},
		// An IPv6 address is searched as the /64 its events record.
		{"", "2001:db8:1:2::99", "", []event{
			{auth.EventLockout, "ann@example.com", "2001:db8:1:2::/64"},
			{auth.EventLoginFailed, "ann@example.com", "2001:db8:1:2::/64"}}},
		{"", "2001:db8:1:2:ffff::/64", auth.EventLockout, []event{
			{auth.EventLockout, "ann@example.com", "2001:db8:1:2::/64"}}},
		{"ann@example.com", "192.0.2.1", auth.EventLoginFailed, []event{
			{auth.EventLoginFailed, "ann@example.com", "192.0.2.1"}}},
		{"", "", auth.EventAttackStarted, []event{{auth.EventAttackStarted, "", ""}}},
		{"carol@example.com", "", "", nil},
	}
	for _, c := range cases {
		q, err := dashboard.ParseEventSearch(c.account, c.network, c.kind)
		if err != nil {
			t.Fatalf("%q %q %q: %v", c.account, c.network, c.kind, err)
		}
		q.Limit = 10
		var got []event
		for _, e := range search(t, s, q) {
			got = append(got, event{e.Kind, e.Account, e.Source})
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q %q %q: got %v, want %v", c.account, c.network, c.kind, got, c.want)
		}
	}

	// All seven, two at a time.
	ids := pagedIDs(t, s, dashboard.EventSearch{Limit: 2}, 5)
	all := search(t, s, dashboard.EventSearch{Limit: 10})
	var want []int64
	for _, e := range all {
		want = append(want, e.ID)
	}
	if len(want) != len(batch) || !slices.Equal(ids, want) {
		t.Errorf("pages gave %v, one read gave %v", ids, want)
	}
}

// TestSearchEventsByPrefix: a search by a network finds every event whose
// recorded network overlaps it: the addresses and networks inside it, and
// the wider ones that hold it (an IPv6 client's /64, the /24 or /48 of a
// summary of folded events), which may be of it. A source that is no
// network ("unknown") or none is never found, and breaks no search.
func TestSearchEventsByPrefix(t *testing.T) {
	s := newStore(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var batch []auth.Event
	for i, source := range []string{
		"203.0.113.7", "203.0.113.9", "2001:db8:7:1::/64", // 0-2
		"203.0.113.0/24", "2001:db8:7::/48", // 3-4: summaries
		"203.0.114.1", "2001:db8:8::/64", "192.0.2.1", // 5-7: next door
		"unknown", "", // 8-9
	} {
		batch = append(batch, auth.Event{At: t0.Add(time.Duration(i) * time.Second), Kind: auth.EventLoginFailed, Source: source})
	}
	if err := s.InsertEvents(t.Context(), auth.NewEventBatchID(), batch); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		network string
		want    []string // newest first
	}{
		{"203.0.113.0/24", []string{"203.0.113.0/24", "203.0.113.9", "203.0.113.7"}},
		{"203.0.113.0/25", []string{"203.0.113.0/24", "203.0.113.9", "203.0.113.7"}},
		{"203.0.113.8/29", []string{"203.0.113.0/24", "203.0.113.9"}},
		{"203.0.113.7", []string{"203.0.113.0/24", "203.0.113.7"}},
		{"203.0.0.0/16", []string{"203.0.114.1", "203.0.113.0/24", "203.0.113.9", "203.0.113.7"}},
		{"::ffff:203.0.113.0/120", []string{"203.0.113.0/24", "203.0.113.9", "203.0.113.7"}},
		{"2001:db8:7::/48", []string{"2001:db8:7::/48", "2001:db8:7:1::/64"}},
		{"2001:db8::/32", []string{"2001:db8:8::/64", "2001:db8:7::/48", "2001:db8:7:1::/64"}},
		{"2001:db8:7:1::/64", []string{"2001:db8:7::/48", "2001:db8:7:1::/64"}},
		{"2001:db8:7:1:2::/80", []string{"2001:db8:7::/48", "2001:db8:7:1::/64"}},
		{"2001:db8:7:1::99", []string{"2001:db8:7::/48", "2001:db8:7:1::/64"}},
		{"2001:db8:7:2::1", []string{"2001:db8:7::/48"}},
		{"0.0.0.0/0", []string{"192.0.2.1", "203.0.114.1", "203.0.113.0/24", "203.0.113.9", "203.0.113.7"}},
		{"198.51.100.0/24", nil},
	}
	for _, c := range cases {
		q, err := dashboard.ParseEventSearch("", c.network, "")
		if err != nil {
			t.Fatalf("%s: %v", c.network, err)
		}
		q.Limit = 20
		var got []string
		for _, e := range search(t, s, q) {
			got = append(got, e.Source)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("network=%s: got %q, want %q", c.network, got, c.want)
		}
	}
}

// TestParseEventSearchRefuses: an unknown kind or a network that is not an
// address or a prefix is a field error, which is answered 400.
func TestParseEventSearchRefuses(t *testing.T) {
	for _, c := range [][3]string{
		{"", "", "login_exploded"},
		{"", "", "Lockout"},
		{"", "192.0.2", ""},
		{"", "192.0.2.0/33", ""},
		{"", "example.com", ""},
		{strings.Repeat("a", 600), "", ""},
	} {
		_, err := dashboard.ParseEventSearch(c[0], c[1], c[2])
		var field *auth.FieldError
		if !asField(err, &field) {
			t.Errorf("%q: got %v, want a field error", c, err)
		}
	}
}

func asField(err error, field **auth.FieldError) bool {
	f, ok := err.(*auth.FieldError)
	*field = f
	return ok
}

// seedEvents writes n events in one statement: one in a thousand a
// lockout, the others sign-ins failed or not, over 20,000 accounts and
// 5,000 networks, one a second back from now. Then ANALYZE, as autovacuum
// would.
func seedEvents(t testing.TB, s *postgres.Store, n int) {
	t.Helper()
	ctx := t.Context()
	if _, err := s.Pool().Exec(ctx, `
		INSERT INTO security_events (at, kind, account_key, ip, detail)
		SELECT now() - g * interval '1 second',
			CASE WHEN g % 1000 = 0 THEN 'lockout' WHEN g % 2 = 0 THEN 'login_failed' ELSE 'login_succeeded' END,
			'user' || (g % 20000) || '@example.com',
			'10.0.' || (g % 5000) / 256 || '.' || (g % 5000) % 256,
			'{}'
		FROM generate_series(1, $1::int) g`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `ANALYZE security_events`); err != nil {
		t.Fatal(err)
	}
}

// pagedIDs reads at most pages pages of q, each after the last event of
// the one before, and returns their events' IDs in order.
func pagedIDs(t testing.TB, s *postgres.Store, q dashboard.EventSearch, pages int) []int64 {
	t.Helper()
	var ids []int64
	for range pages {
		page := search(t, s, q)
		for _, e := range page {
			ids = append(ids, e.ID)
		}
		if len(page) < q.Limit {
			break
		}
		last := page[len(page)-1]
		q.Before = dashboard.EventCursor{At: last.At, ID: last.ID}
	}
	return ids
}

// planNodes lists the nodes of an EXPLAIN (FORMAT JSON) plan as
// "Node Type" or "Node Type on Index Name".
func planNodes(t testing.TB, s *postgres.Store, q dashboard.EventSearch) []string {
	t.Helper()
	sql, args := postgres.SearchQuery(q)
	var raw []byte
	if err := s.Pool().QueryRow(t.Context(), "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var plan []struct{ Plan node }
	if err := json.Unmarshal(raw, &plan); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(n node)
	walk = func(n node) {
		s := n.NodeType
		if n.IndexName != "" {
			s += " on " + n.IndexName
		}
		out = append(out, s)
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plan[0].Plan)
	return out
}

type node struct {
	NodeType  string `json:"Node Type"`
	IndexName string `json:"Index Name"`
	Plans     []node `json:"Plans"`
}

// searchEventsSeeded is how many events TestSearchEventsPlans seeds; the
// benchmark seeds a million.
const searchEventsSeeded = 100_000

// TestSearchEventsPlans: on many events, each filter's page, first or
// later, reads its index, never the whole table. (An account or network
// with few events is read through its index and its few rows sorted; an
// account with many is read in its index's order, a network with many in
// the log's, stopping at the page's end.)
func TestSearchEventsPlans(t *testing.T) {
	s := newStore(t)
	seedEvents(t, s, searchEventsSeeded)
	var last dashboard.StoredEvent
	for _, e := range search(t, s, dashboard.EventSearch{Limit: 500}) {
		last = e
	}
	cursor := dashboard.EventCursor{At: last.At, ID: last.ID}
	cases := []struct {
		q     dashboard.EventSearch
		index string
	}{
		{dashboard.EventSearch{}, "security_events_at_id_idx"},
		{dashboard.EventSearch{Account: "user42@example.com"}, "security_events_account_key_at_id_idx"},
		{dashboard.EventSearch{Network: "10.0.1.2"}, "security_events_network_idx"},
		// 8 of the 5,000 networks: read through the network's index.
		{dashboard.EventSearch{Network: "10.0.19.128/25"}, "security_events_network_idx"},
		// Every network: read in the page's order, stopping at its end.
		{dashboard.EventSearch{Network: "10.0.0.0/8"}, "security_events_at_id_idx"},
		{dashboard.EventSearch{Kind: auth.EventLockout}, "security_events_kind_at_id_idx"},
	}
	for _, c := range cases {
		for _, before := range []dashboard.EventCursor{{}, cursor} {
			q := c.q
			q.Before, q.Limit = before, dashboard.SearchPage
			nodes := planNodes(t, s, q)
			if !slices.Contains(nodes, "Index Scan on "+c.index) && !slices.Contains(nodes, "Bitmap Index Scan on "+c.index) {
				t.Errorf("%+v: plan %v does not scan %s", q, nodes, c.index)
			}
			for _, n := range nodes {
				if strings.Contains(n, "Seq Scan") {
					t.Errorf("%+v: plan %v has %s", q, nodes, n)
				}
			}
			start := time.Now()
			got := search(t, s, q)
			t.Logf("%+v: %d events in %v, plan %v", q, len(got), time.Since(start), nodes)
		}
	}
}

// BenchmarkSearchEvents reads a page of each filter among a million
// events.
func BenchmarkSearchEvents(b *testing.B) {
	_, pool := testenv.Schema(b)
	s := postgres.New(pool)
	start := time.Now()
	seedEvents(b, s, 1_000_000)
	b.Logf("seeded a million events in %v", time.Since(start))
	for _, c := range []struct {
		name string
		q    dashboard.EventSearch
	}{
		{"all", dashboard.EventSearch{}},
		{"account", dashboard.EventSearch{Account: "user42@example.com"}},
		{"network", dashboard.EventSearch{Network: "10.0.1.2"}},
		{"prefix", dashboard.EventSearch{Network: "10.0.19.128/25"}},
		{"kind", dashboard.EventSearch{Kind: auth.EventLockout}},
		{"combined", dashboard.EventSearch{Account: "user42@example.com", Kind: auth.EventLoginFailed}},
	} {
		b.Run(c.name, func(b *testing.B) {
			q := c.q
			q.Limit = dashboard.SearchPage
			b.Logf("plan %v", planNodes(b, s, q))
			for b.Loop() {
				search(b, s, q)
			}
		})
	}
}

// queryLog notes every query a pool sends, with its arguments.
type queryLog struct {
	mu      sync.Mutex
	queries []loggedQuery
}

type loggedQuery struct {
	sql  string
	args []any
}

func (l *queryLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queries = append(l.queries, loggedQuery{d.SQL, d.Args})
	return ctx
}

func (l *queryLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the queries noted since the last take.
func (l *queryLog) take() []loggedQuery {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queries
	l.queries = nil
	return q
}

// rowsExamined runs q under EXPLAIN ANALYZE and adds up the rows its scans
// gave and those their filters removed: how much of the log it read.
func rowsExamined(t *testing.T, pool *pgxpool.Pool, q loggedQuery) int {
	t.Helper()
	var raw []byte
	if err := pool.QueryRow(t.Context(), "EXPLAIN (ANALYZE, FORMAT JSON) "+q.sql, q.args...).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	type scan struct {
		NodeType string  `json:"Node Type"`
		Rows     float64 `json:"Actual Rows"`
		Loops    float64 `json:"Actual Loops"`
		Removed  float64 `json:"Rows Removed by Filter"`
		Recheck  float64 `json:"Rows Removed by Index Recheck"`
		Plans    []scan  `json:"Plans"`
	}
	var plan []struct{ Plan scan }
	if err := json.Unmarshal(raw, &plan); err != nil {
		t.Fatal(err)
	}
	total := 0.0
	var walk func(n scan)
	walk = func(n scan) {
		if strings.Contains(n.NodeType, "Scan") && n.NodeType != "CTE Scan" {
			total += (n.Rows + n.Removed + n.Recheck) * max(n.Loops, 1)
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plan[0].Plan)
	return int(total)
}

// TestSearchByNetworkReadsNotTheWholeLog: a page searched by network reads
// at most a bounded walk of the log and the network's own events, never the
// whole log, where reading the log in order would: for a network whose
// events are old, and for one whose events another filter excludes (the
// sign-ins an attacking network got right, which are none). The planner
// takes such a network, many of the log's, to fill a page within the
// newest events.
func TestSearchByNetworkReadsNotTheWholeLog(t *testing.T) {
	dbURL, _ := testenv.Schema(t)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	queries := &queryLog{}
	cfg.ConnConfig.Tracer = queries
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := postgres.New(pool)
	seedEvents(t, s, searchEventsSeeded)
	// Two attacks of 5,000 failed sign-ins each, one account apiece: one
	// from 203.0.113.0/24 a week before every other event, one from
	// 198.51.100.0/24 among the newest.
	if _, err := pool.Exec(t.Context(), `
		INSERT INTO security_events (at, kind, account_key, ip, detail)
		SELECT now() - interval '7 days' - g * interval '1 second', 'login_failed',
			'old' || g || '@example.com', '203.0.113.' || (g % 256), '{}'
		FROM generate_series(1, 5000) g;
		INSERT INTO security_events (at, kind, account_key, ip, detail)
		SELECT now() - g * interval '100 milliseconds', 'login_failed',
			'new' || g || '@example.com', '198.51.100.' || (g % 256), '{}'
		FROM generate_series(1, 5000) g;
		ANALYZE security_events`); err != nil {
		t.Fatal(err)
	}
	const attack = 5000
	for _, c := range []struct {
		q    dashboard.EventSearch
		want int
	}{
		{dashboard.EventSearch{Network: "203.0.113.0/24"}, dashboard.SearchPage},
		{dashboard.EventSearch{Network: "203.0.113.7"}, 20},
		{dashboard.EventSearch{Network: "203.0.113.0/24", Kind: auth.EventLoginSucceeded}, 0},
		{dashboard.EventSearch{Network: "198.51.100.0/24", Kind: auth.EventLoginSucceeded}, 0},
		{dashboard.EventSearch{Network: "198.51.100.0/24", Kind: auth.EventLoginFailed}, dashboard.SearchPage},
		{dashboard.EventSearch{Network: "198.51.100.0/24"}, dashboard.SearchPage},
		{dashboard.EventSearch{Network: "203.0.113.0/24", Account: "user42@example.com"}, 0},
		{dashboard.EventSearch{Network: "10.0.0.0/8", Kind: auth.EventLockout}, dashboard.SearchPage},
	} {
		q := c.q
		q.Limit = dashboard.SearchPage
		queries.take()
		got := search(t, s, q)
		if len(got) != c.want {
			t.Errorf("%+v: %d events, want %d", c.q, len(got), c.want)
		}
		examined := 0
		sent := queries.take()
		for _, sq := range sent {
			examined += rowsExamined(t, pool, sq)
		}
		// The walk's edge and the walk, then the attack's events, each
		// counted at most twice (an index's rows and the table's).
		if bound := 2 * (2*postgres.NetworkWalk + attack); examined > bound {
			t.Errorf("%+v: %d queries read %d rows of the log's %d, want at most %d", c.q, len(sent), examined, searchEventsSeeded+2*attack, bound)
		}
	}
}

// TestSearchByNetworkPagesAcrossTheWalk: a search by network whose events
// lie both within the walk and beyond it finds exactly the events that
// match, newest first, page after page, as one query over the whole log
// would: none is lost or repeated where the walk ends, events of one
// instant included.
func TestSearchByNetworkPagesAcrossTheWalk(t *testing.T) {
	s := newStore(t)
	n := 3*postgres.NetworkWalk + 500
	// Three events an instant, so that pages and the walk's end fall
	// among events of one time; every seventh from 192.0.2.0/24, every
	// other one of those a success.
	if _, err := s.Pool().Exec(t.Context(), `
		INSERT INTO security_events (at, kind, account_key, ip, detail)
		SELECT timestamptz '2026-12-01 00:00:00+00' - (g / 3) * interval '1 second',
			CASE WHEN g % 14 = 0 THEN 'login_succeeded' ELSE 'login_failed' END,
			'user' || (g % 100) || '@example.com',
			CASE WHEN g % 7 = 0 THEN '192.0.2.' || (g % 256) ELSE '10.1.' || (g % 200) || '.1' END,
			'{}'
		FROM generate_series(1, $1::int) g`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(t.Context(), `ANALYZE security_events`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []dashboard.EventSearch{
		{Network: "192.0.2.0/24"},
		{Network: "192.0.2.0/24", Kind: auth.EventLoginSucceeded},
		{Network: "192.0.2.0/24", Account: "user14@example.com"},
		{Network: "10.1.0.0/16", Kind: auth.EventLoginFailed},
		// Too few in the walk to fill a page: the rest from the
		// network's index.
		{Network: "192.0.2.0/24", Kind: auth.EventLoginFailed},
		{Network: "10.1.0.0/22"},
		{Network: "10.1.5.1"},
	} {
		var want []int64
		where := "security_event_network(ip) && $1::inet AND ($2 = '' OR kind = $2) AND ($3 = '' OR account_key = $3)"
		rows, err := s.Pool().Query(t.Context(), "SELECT id FROM security_events WHERE "+where+" ORDER BY at DESC, id DESC", q.Network, q.Kind, q.Account)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		page := q
		page.Limit = 173 // pages that end anywhere
		got := pagedIDs(t, s, page, len(want)/page.Limit+2)
		if !slices.Equal(got, want) {
			t.Errorf("%+v: paged %d events, want the %d one query finds", q, len(got), len(want))
		}
	}
}

// BenchmarkSearchEventsByNetwork compares, taking turns within each
// iteration, a page by network read as one query (the planner's choice,
// which reads the log in order for a network it takes to be many of the
// log's) and as SearchEvents reads it (a bounded walk, then the
// network's index), among a million events and two attacks: 150,000
// failed sign-ins from 203.0.113.0/24 in the last hours, 100,000 from
// 198.51.100.0/24 sixty days before every other event.
func BenchmarkSearchEventsByNetwork(b *testing.B) {
	_, pool := testenv.Schema(b)
	s := postgres.New(pool)
	seedEvents(b, s, 1_000_000)
	for _, sql := range []string{
		`INSERT INTO security_events (at, kind, account_key, ip, detail)
		SELECT now() - g * interval '100 milliseconds', 'login_failed',
			'victim' || g || '@example.com', '203.0.113.' || (g % 256), '{}'
		FROM generate_series(1, 150000) g`,
		`INSERT INTO security_events (at, kind, account_key, ip, detail)
		SELECT now() - interval '60 days' - g * interval '1 second', 'login_failed',
			'old' || g || '@example.com', '198.51.100.' || (g % 256), '{}'
		FROM generate_series(1, 100000) g`,
		`ANALYZE security_events`,
	} {
		if _, err := pool.Exec(b.Context(), sql); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		q    dashboard.EventSearch
	}{
		{"attack-successes", dashboard.EventSearch{Network: "203.0.113.0/24", Kind: auth.EventLoginSucceeded}},
		{"attack-failures", dashboard.EventSearch{Network: "203.0.113.0/24", Kind: auth.EventLoginFailed}},
		{"old-attack", dashboard.EventSearch{Network: "198.51.100.0/24"}},
		{"old-attack-address", dashboard.EventSearch{Network: "198.51.100.7"}},
		{"address", dashboard.EventSearch{Network: "10.0.1.2"}},
		{"prefix-lockouts", dashboard.EventSearch{Network: "10.0.0.0/16", Kind: auth.EventLockout}},
		{"attack-account", dashboard.EventSearch{Network: "203.0.113.0/24", Account: "user42@example.com"}},
		{"everyone", dashboard.EventSearch{Network: "10.0.0.0/8"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			q := c.q
			q.Limit = dashboard.SearchPage
			sql, args := postgres.SearchQuery(q)
			// Unnamed, as SearchEvents sends its statements.
			args = append([]any{pgx.QueryExecModeExec}, args...)
			var one, two time.Duration
			for b.Loop() {
				start := time.Now()
				rows, err := pool.Query(b.Context(), sql, args...)
				if err != nil {
					b.Fatal(err)
				}
				rows.Close()
				one += time.Since(start)
				start = time.Now()
				search(b, s, q)
				two += time.Since(start)
			}
			b.ReportMetric(float64(one.Microseconds())/float64(b.N)/1000, "one-query-ms")
			b.ReportMetric(float64(two.Microseconds())/float64(b.N)/1000, "searchevents-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// TestSearchByNetworkAndAccountPastTheWalk searches a network for one
// account with more events than the walk, whose page the walk does not
// fill: the rest, read through the network's index, are that account's
// only (not the network's other accounts'), and the walk's last event,
// one of the network's, is on the page once.
func TestSearchByNetworkAndAccountPastTheWalk(t *testing.T) {
	s := newStore(t)
	// Among other accounts' events from the network, busy@example.com
	// has twice the walk's, one a second, every fiftieth from the
	// network: the walk's last one (the walk's count is a multiple of
	// fifty) among them.
	for _, sql := range []string{`
		INSERT INTO security_events (at, kind, account_key, ip, detail)
		SELECT timestamptz '2026-12-01 00:00:00+00' - g * interval '1 second',
			'login_failed', 'other' || (g % 10) || '@example.com', '192.0.2.' || (g % 256), '{}'
		FROM generate_series(1, $1::int) g`, `
		INSERT INTO security_events (at, kind, account_key, ip, detail)
		SELECT timestamptz '2026-12-01 00:00:00+00' - g * interval '1 second' - interval '500 milliseconds',
			'login_failed', 'busy@example.com',
			CASE WHEN g % 50 = 0 THEN '192.0.2.' || (g % 256) ELSE '10.2.' || (g % 200) || '.1' END, '{}'
		FROM generate_series(1, $1::int) g`,
	} {
		if _, err := s.Pool().Exec(t.Context(), sql, 2*postgres.NetworkWalk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Pool().Exec(t.Context(), `ANALYZE security_events`); err != nil {
		t.Fatal(err)
	}
	if postgres.NetworkWalk%50 != 0 {
		t.Fatalf("the walk's %d events end on one not from the network", postgres.NetworkWalk)
	}
	q := dashboard.EventSearch{Network: "192.0.2.0/24", Account: "busy@example.com", Limit: 173}
	got := search(t, s, q)
	if want := 2 * postgres.NetworkWalk / 50; len(got) != want {
		t.Errorf("%d events, want busy@example.com's %d from the network", len(got), want)
	}
	seen := map[int64]bool{}
	for i, e := range got {
		if e.Account != q.Account {
			t.Errorf("event %d of %s, searched for %s", e.ID, e.Account, q.Account)
		}
		if seen[e.ID] {
			t.Errorf("event %d twice", e.ID)
		}
		seen[e.ID] = true
		if i > 0 && !got[i-1].At.After(e.At) {
			t.Errorf("event %d at %v after %v, want newest first", e.ID, e.At, got[i-1].At)
		}
	}
}
