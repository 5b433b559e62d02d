package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// rowStore keeps the rows written, and fails the writes it is told to.
type rowStore struct {
	mu    sync.Mutex
	rows  []Event
	fails int
}

func (s *rowStore) InsertEvents(_ context.Context, _ EventBatchID, batch []Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fails > 0 {
		s.fails--
		return errors.New("postgres is down")
	}
	s.rows = append(s.rows, batch...)
	return nil
}

type nopCounter struct{}

func (nopCounter) CountEvents(context.Context, []Event) error { return nil }

// auditRecorder is a recorder writing to store, with its audit stream in
// the returned buffer as the JSON handler of serve writes it.
func auditRecorder(store EventStore, now time.Time) (*recorder, *bytes.Buffer) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	r := newRecorder(AuditedEvents(store, log), nopCounter{}, slog.New(slog.DiscardHandler), func() time.Time { return now })
	return r, &buf
}

// auditLines decodes buf's lines.
func auditLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	dec := json.NewDecoder(buf)
	for dec.More() {
		var line map[string]any
		if err := dec.Decode(&line); err != nil {
			t.Fatalf("audit line is not JSON: %v", err)
		}
		lines = append(lines, line)
	}
	return lines
}

// TestAuditLinePerRow: every row written is one line, in order, whose
// fields are the row's, with the row's count; a flood of identical
// rejections, coalesced and folded, gives lines whose counts add up to
// the flood as the rows' do; and a batch written again after a failed
// write is logged once.
func TestAuditLinePerRow(t *testing.T) {
	minute := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	store := &rowStore{fails: 1}
	r, buf := auditRecorder(store, minute.Add(time.Hour))

	r.Record(Event{At: minute, Kind: EventLoginFailed, Account: "ann@example.com", UserID: 7, Source: "192.0.2.1"})
	r.Record(Event{At: minute.Add(time.Second), Kind: EventLoginSucceeded, Account: "bob@example.com", UserID: 8,
		Source: "2001:db8::/64", Detail: map[string]string{"app": "shop", "device": "new"}})
	r.Record(Event{At: minute.Add(2 * time.Second), Kind: EventSessionEnded, Account: "ann@example.com", UserID: 7,
		Source: "192.0.2.1", Detail: map[string]string{"by": "owner", "scope": "others", "count": "3"}})
	const flood = 500
	for i := range flood {
		r.Record(Event{At: minute.Add(3*time.Second + time.Duration(i)*time.Millisecond), Kind: EventLoginRejected,
			Account: "ann@example.com", UserID: 7, Source: "198.51.100.9", Rule: RuleAccountIP})
	}

	if err := r.Flush(context.Background()); err == nil {
		t.Fatal("first flush: no error from a failing store")
	}
	if buf.Len() != 0 {
		t.Fatalf("lines written for rows that were not: %s", buf)
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	rows, lines := store.rows, auditLines(t, buf)
	if len(lines) != len(rows) {
		t.Fatalf("%d lines for %d rows:\n%s", len(lines), len(rows), buf)
	}
	rejected := 0
	for i, row := range rows {
		line := lines[i]
		count, _ := rowCount(row)
		want := map[string]any{
			"time":    row.At.UTC().Format(time.RFC3339Nano),
			"level":   "INFO",
			"msg":     AuditMessage,
			"log":     AuditLog,
			"event":   row.Kind,
			"account": row.Account,
			"source":  row.Source,
			"rule":    row.Rule,
			"count":   float64(count),
		}
		if row.UserID != 0 {
			want["user_id"] = float64(row.UserID)
		}
		for name, v := range want {
			if line[name] != v {
				t.Errorf("row %d (%s): line's %s = %v, want %v", i, row.Kind, name, line[name], v)
			}
		}
		if row.Kind == EventLoginRejected {
			rejected += int(line["count"].(float64))
			if n, _ := strconv.Atoi(row.Detail["count"]); row.Detail["count"] != "" && n != count {
				t.Errorf("rejection row's count %d, line's %d", n, count)
			}
		}
	}
	if rejected != flood {
		t.Errorf("rejection lines count %d rejections, want %d", rejected, flood)
	}
	if len(rows) >= flood {
		t.Errorf("%d rows for a flood of %d: not coalesced", len(rows), flood)
	}

	// Fields and detail of the lines of single events.
	byKind := map[string]map[string]any{}
	for _, line := range lines {
		byKind[line["event"].(string)] = line
	}
	keys := func(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
	for _, tc := range []struct {
		kind   string
		fields []string
		detail map[string]any
	}{
		{EventLoginFailed, []string{"account", "count", "event", "level", "log", "msg", "rule", "source", "time", "user_id"}, nil},
		{EventLoginSucceeded, []string{"account", "app", "count", "detail", "event", "level", "log", "msg", "rule", "source", "time", "user_id"},
			map[string]any{"device": "new"}},
		// A session_ended's "count" is of sessions, not of rows.
		{EventSessionEnded, []string{"account", "count", "detail", "event", "level", "log", "msg", "rule", "source", "time", "user_id"},
			map[string]any{"by": "owner", "scope": "others", "count": "3"}},
	} {
		line := byKind[tc.kind]
		if got := keys(line); !slices.Equal(got, tc.fields) {
			t.Errorf("%s line's fields = %v, want %v", tc.kind, got, tc.fields)
		}
		if tc.detail != nil {
			if d, _ := line["detail"].(map[string]any); !maps.Equal(d, tc.detail) {
				t.Errorf("%s line's detail = %v, want %v", tc.kind, line["detail"], tc.detail)
			}
		}
		if line["count"] != float64(1) {
			t.Errorf("%s line's count = %v, want 1", tc.kind, line["count"])
		}
	}
}

// TestAuditOff: a recorder without a stream writes its rows and no line.
func TestAuditOff(t *testing.T) {
	var buf bytes.Buffer
	store := &rowStore{}
	r := newRecorder(store, nopCounter{}, slog.New(slog.NewJSONHandler(&buf, nil)), nil)
	r.Record(Event{At: time.Now(), Kind: EventLoginFailed, Account: "ann@example.com", Source: "192.0.2.1"})
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(store.rows) != 1 || buf.Len() != 0 {
		t.Errorf("%d rows, log %q; want 1 row and no line", len(store.rows), buf.String())
	}
}
