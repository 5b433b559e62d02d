package postgres_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/postgres"
)

// TestEventBatchWrittenOnce: a batch written again under its id, as the
// recorder writes a batch whose answer was lost, succeeds and stores its
// rows once; another id is another batch; the sweep removes the ids of
// batches written before its time, and only those.
func TestEventBatchWrittenOnce(t *testing.T) {
	ctx := t.Context()
	_, pool := testenv.Schema(t)
	s := postgres.New(pool)
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	batch := []auth.Event{
		{At: at, Kind: auth.EventLoginFailed, Account: "ann@example.com", Source: "192.0.2.1"},
		{At: at, Kind: auth.EventLoginRejected, Account: "ann@example.com", Source: "192.0.2.1", Rule: auth.RuleLockout,
			Detail: map[string]string{"count": "3"}},
	}
	count := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM security_events`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	id := auth.NewEventBatchID()
	for range 2 {
		if err := s.InsertEvents(ctx, id, batch); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(); n != len(batch) {
		t.Errorf("%d rows after one batch written twice under its id, want %d", n, len(batch))
	}
	if err := s.InsertEvents(ctx, auth.NewEventBatchID(), batch); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2*len(batch) {
		t.Errorf("%d rows after the batch under another id, want %d", n, 2*len(batch))
	}

	if n, err := s.Sweep(ctx, auth.SweepEventBatches, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("sweep of batches an hour old: %d %v, want none removed", n, err)
	}
	if n, err := s.Sweep(ctx, auth.SweepEventBatches, time.Now().Add(time.Hour)); err != nil || n != 2 {
		t.Fatalf("sweep: %d %v, want the 2 ids removed", n, err)
	}
	if n := count(); n != 2*len(batch) {
		t.Errorf("%d rows after the sweep of ids, want %d: the events stay", n, 2*len(batch))
	}
}

// TestSweepSecurityEvents: the sweep of the security log removes the
// events from before its time, and keeps the rest: the newest of the log,
// and the one at the cutoff itself.
func TestSweepSecurityEvents(t *testing.T) {
	ctx := t.Context()
	_, pool := testenv.Schema(t)
	s := postgres.New(pool)
	cutoff := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var batch []auth.Event
	for _, at := range []time.Time{cutoff.Add(-time.Hour), cutoff.Add(-time.Second), cutoff, cutoff.Add(time.Second), cutoff.Add(time.Hour)} {
		batch = append(batch, auth.Event{At: at, Kind: auth.EventLoginFailed, Account: "ann@example.com", Source: "192.0.2.1"})
	}
	if err := s.InsertEvents(ctx, auth.NewEventBatchID(), batch); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(ctx, auth.SweepSecurityEvents, cutoff); err != nil || n != 2 {
		t.Fatalf("sweep: %d %v, want the 2 events before the cutoff removed", n, err)
	}
	var kept []time.Time
	rows, err := pool.Query(ctx, `SELECT at FROM security_events ORDER BY at`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var at time.Time
		if err := rows.Scan(&at); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, at.UTC())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []time.Time{cutoff, cutoff.Add(time.Second), cutoff.Add(time.Hour)}; !slices.Equal(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
}

// TestEventRowRefusedForGood: a batch holding a row Postgres refuses
// whatever happens (a NUL byte or invalid UTF-8 in a text column, a NUL in
// the detail's JSON, an empty kind against its check) fails as
// auth.ErrEventsRefused, with Postgres's error kept, and writes nothing,
// its id included: the good rows can go again under the same id. A write
// that failed for want of time is not refused for good.
func TestEventRowRefusedForGood(t *testing.T) {
	ctx := t.Context()
	_, pool := testenv.Schema(t)
	s := postgres.New(pool)
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	good := auth.Event{At: at, Kind: auth.EventLoginFailed, Account: "ann@example.com", Source: "192.0.2.1"}
	count := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM security_events`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		name string
		bad  auth.Event
		code string
	}{
		{"NUL in the account", auth.Event{At: at, Kind: auth.EventLoginFailed, Account: "ann\x00@example.com"}, "22021"},
		{"invalid UTF-8 in the source", auth.Event{At: at, Kind: auth.EventLoginFailed, Source: "192.0.2.\xff"}, "22021"},
		{"NUL in the detail", auth.Event{At: at, Kind: auth.EventLoginFailed, Detail: map[string]string{"browser": "a\x00b"}}, "22P05"},
		{"empty kind", auth.Event{At: at}, "23514"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := auth.NewEventBatchID()
			before := count()
			err := s.InsertEvents(ctx, id, []auth.Event{good, c.bad, good})
			if !errors.Is(err, auth.ErrEventsRefused) {
				t.Fatalf("InsertEvents: %v, want auth.ErrEventsRefused", err)
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != c.code {
				t.Errorf("InsertEvents: %v, want Postgres's error %s kept", err, c.code)
			}
			if n := count(); n != before {
				t.Errorf("%d rows written by the refused batch", n-before)
			}
			if err := s.InsertEvents(ctx, id, []auth.Event{good, good}); err != nil {
				t.Fatal(err)
			}
			if n := count(); n != before+2 {
				t.Errorf("%d rows written by the good rows under the refused batch's id, want 2", n-before)
			}
		})
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.InsertEvents(cancelled, auth.NewEventBatchID(), []auth.Event{good}); err == nil || errors.Is(err, auth.ErrEventsRefused) {
		t.Errorf("InsertEvents without time: %v, want an error that is not auth.ErrEventsRefused", err)
	}
}
