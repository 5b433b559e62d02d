package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// failingCounter keeps the batches it is given and fails the first fails
// of them, as a lost answer would: Redis may have counted them.
type failingCounter struct {
	mu      sync.Mutex
	batches []string
	fails   int
}

func (c *failingCounter) CountEvents(_ context.Context, batch []Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	accounts := make([]string, len(batch))
	for i, e := range batch {
		accounts[i] = e.Account
	}
	c.batches = append(c.batches, strings.Join(accounts, " "))
	if c.fails > 0 {
		c.fails--
		return errors.New("i/o timeout")
	}
	return nil
}

// TestCountSentAgainAsItWas: a batch CountEvents failed with, which Redis
// may have counted, goes again alone and as it was, however many events
// come after it, so that the counter can tell it counted it already; the
// events after it follow once it has gone. While the counters are down,
// the events dropped past the backlog's bound are the oldest after it.
func TestCountSentAgainAsItWas(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	record := func(r *recorder, accounts ...string) {
		for _, a := range accounts {
			r.Record(Event{At: now, Kind: EventLoginFailed, Account: a})
		}
	}
	t.Run("sent again", func(t *testing.T) {
		c := &failingCounter{fails: 2}
		r := newRecorder(&rowStore{}, c, slog.New(slog.DiscardHandler), func() time.Time { return now })
		record(r, "a", "b")
		if err := r.flush(t.Context(), false); err == nil {
			t.Fatal("the first count did not fail")
		}
		record(r, "c")
		if err := r.flush(t.Context(), false); err == nil {
			t.Fatal("the second count did not fail")
		}
		record(r, "d")
		if err := r.flush(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprintf("%q", c.batches), `["a b" "a b" "a b" "c d"]`; got != want {
			t.Errorf("batches counted %s, want %s", got, want)
		}
	})
	t.Run("kept whole past the bound", func(t *testing.T) {
		c := &failingCounter{fails: 1 << 30}
		r := newRecorder(&rowStore{}, c, slog.New(slog.DiscardHandler), func() time.Time { return now })
		record(r, "first")
		_ = r.flush(t.Context(), false)
		for i := range recorderQueue + 10 {
			record(r, fmt.Sprint(i))
			if len(r.queue) == cap(r.queue) {
				_ = r.flush(t.Context(), false)
			}
		}
		for len(r.queue) > 0 {
			_ = r.flush(t.Context(), false)
		}
		c.fails = 0
		c.batches = nil
		if err := r.flush(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		if len(c.batches) != 2 || c.batches[0] != "first" || !strings.HasPrefix(c.batches[1], "11 12 ") {
			t.Errorf("after the outage, counted %d batches beginning %.20q; want \"first\" alone, then from event 11 on", len(c.batches), c.batches)
		}
		if got := r.Dropped(); got != 11 {
			t.Errorf("%d events dropped, want the 11 oldest after the first", got)
		}
	})
}

// failingStore keeps the batches it is given, with their ids, and fails
// the first fails of them, as a lost answer would: Postgres may have
// written them.
type failingStore struct {
	ids     []EventBatchID
	batches []string
	fails   int
}

func (s *failingStore) InsertEvents(_ context.Context, id EventBatchID, batch []Event) error {
	accounts := make([]string, len(batch))
	for i, e := range batch {
		accounts[i] = e.Account
	}
	s.ids = append(s.ids, id)
	s.batches = append(s.batches, strings.Join(accounts, " "))
	if s.fails > 0 {
		s.fails--
		return errors.New("i/o timeout")
	}
	return nil
}

// TestBatchWrittenAgainAsItWas: a batch InsertEvents failed with, which
// Postgres may have written, goes again alone, under its id and as it
// was, until it is written; the rows after it follow in a batch of their
// own, under a new id.
func TestBatchWrittenAgainAsItWas(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s := &failingStore{fails: 2}
	r := newRecorder(s, nopCounter{}, slog.New(slog.DiscardHandler), func() time.Time { return now })
	record := func(accounts ...string) {
		for _, a := range accounts {
			r.Record(Event{At: now, Kind: EventLoginSucceeded, Account: a})
		}
	}
	record("a", "b")
	if err := r.flush(t.Context(), false); err == nil {
		t.Fatal("the first write did not fail")
	}
	record("c")
	if err := r.flush(t.Context(), false); err == nil {
		t.Fatal("the second write did not fail")
	}
	record("d")
	if err := r.flush(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprintf("%q", s.batches), `["a b" "a b" "a b" "c d"]`; got != want {
		t.Errorf("batches written %s, want %s", got, want)
	}
	if len(s.ids) == 4 && (s.ids[1] != s.ids[0] || s.ids[2] != s.ids[0] || s.ids[3] == s.ids[0]) {
		t.Errorf("batch ids %x: want the first three the same, the last another", s.ids)
	}
}

// TestBatchDroppedFirstPastTheBound: while Postgres is down, the batch
// that goes again counts against the backlog's bound, and is the oldest:
// past the bound it is dropped first, then the oldest rows after it, and
// the backlog is written after the outage in batches of eventBatchRows at
// most, each under an id of its own.
func TestBatchDroppedFirstPastTheBound(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s := &failingStore{fails: 1 << 30}
	r := newRecorder(s, nopCounter{}, slog.New(slog.DiscardHandler), func() time.Time { return now })
	r.Record(Event{At: now, Kind: EventLoginSucceeded, Account: "first"})
	_ = r.flush(t.Context(), false)
	for i := range recorderQueue + 10 {
		r.Record(Event{At: now, Kind: EventLoginSucceeded, Account: fmt.Sprint(i)})
		if len(r.queue) == cap(r.queue) {
			_ = r.flush(t.Context(), false)
		}
	}
	for len(r.queue) > 0 {
		_ = r.flush(t.Context(), false)
	}
	s.fails, s.batches, s.ids = 0, nil, nil
	if err := r.flush(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	written := strings.Fields(strings.Join(s.batches, " "))
	if len(written) == 0 || written[0] == "first" || written[len(written)-1] != fmt.Sprint(recorderQueue+9) {
		t.Fatalf("after the outage, wrote %d rows from %q to %q; want the newest, without the first batch", len(written), written[0], written[len(written)-1])
	}
	if got := r.Dropped(); int(got)+len(written) != recorderQueue+11 || len(written) > recorderQueue {
		t.Errorf("%d events dropped and %d written of %d; want every one either, at most %d written", got, len(written), recorderQueue+11, recorderQueue)
	}
	for i, b := range s.batches {
		if n := len(strings.Fields(b)); n > eventBatchRows {
			t.Errorf("batch %d holds %d rows, over %d", i, n, eventBatchRows)
		}
	}
	if len(s.ids) < 2 || s.ids[0] == s.ids[1] {
		t.Errorf("%d batches, ids %x: want several, each under its own id", len(s.ids), s.ids)
	}
}

// poisonStore writes batches as Postgres does, once per id, and refuses
// for good, as Postgres refuses a row against a constraint, every batch
// holding the account poison. Its first fails writes of a batch without
// poison are written and then fail, as a lost answer would.
type poisonStore struct {
	ids     map[EventBatchID]bool // written
	tried   []EventBatchID        // every write, in order
	written []string
	fails   int
}

func (s *poisonStore) InsertEvents(_ context.Context, id EventBatchID, batch []Event) error {
	s.tried = append(s.tried, id)
	if s.ids[id] {
		return nil
	}
	for _, e := range batch {
		if e.Account == "poison" {
			return fmt.Errorf("%w: ERROR: new row violates check constraint (SQLSTATE 23514)", ErrEventsRefused)
		}
	}
	if s.ids == nil {
		s.ids = map[EventBatchID]bool{}
	}
	s.ids[id] = true
	for _, e := range batch {
		s.written = append(s.written, e.Account)
	}
	if s.fails > 0 {
		s.fails--
		return errors.New("i/o timeout")
	}
	return nil
}

// TestBatchRefusedForGoodIsSplit: a batch the store refuses for good, for
// one row of it, does not hold back its other rows nor those after it:
// they are written by the same flush, in order, and only the row refused
// alone is dropped, counted and logged once, by kind and error, without
// what it holds.
func TestBatchRefusedForGoodIsSplit(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s := &poisonStore{}
	var log bytes.Buffer
	r := newRecorder(s, nopCounter{}, slog.New(slog.NewJSONHandler(&log, nil)), func() time.Time { return now })
	for _, a := range []string{"a", "b", "c", "poison", "d", "e", "f"} {
		r.Record(Event{At: now, Kind: EventLoginSucceeded, Account: a, Detail: map[string]string{"browser": "held-" + a}})
	}
	if err := r.flush(t.Context(), false); err != nil {
		t.Fatalf("flush: %v, want the refused row dropped and the rest written", err)
	}
	if got, want := strings.Join(s.written, " "), "a b c d e f"; got != want {
		t.Errorf("written %q, want %q", got, want)
	}
	if got := r.Dropped(); got != 1 {
		t.Errorf("%d dropped, want the poisoned row alone", got)
	}
	if n := strings.Count(log.String(), "\n"); n != 1 ||
		!strings.Contains(log.String(), `"kind":"`+EventLoginSucceeded+`"`) || !strings.Contains(log.String(), "SQLSTATE 23514") {
		t.Errorf("log of the drop:\n%s\nwant one line with the kind and the error", log.String())
	}
	if strings.Contains(log.String(), "held-") {
		t.Errorf("the log of the drop holds the row's detail:\n%s", log.String())
	}
	seen := map[EventBatchID]bool{}
	for _, id := range s.tried {
		if seen[id] {
			t.Errorf("id %x given to two writes, with none failing", id)
		}
		seen[id] = true
	}
	if err := r.flush(t.Context(), false); err != nil || len(s.written) != 6 {
		t.Errorf("the next flush: %v, %d rows written, want nothing more", err, len(s.written))
	}
}

// TestSplitBatchWrittenAgainAsItWas: a part of a refused batch whose
// write failed, which the store may have written, goes again under its
// id and as it was, so that it is written once; the parts after it wait.
func TestSplitBatchWrittenAgainAsItWas(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s := &poisonStore{fails: 1}
	r := newRecorder(s, nopCounter{}, slog.New(slog.DiscardHandler), func() time.Time { return now })
	for _, a := range []string{"a", "b", "poison", "c"} {
		r.Record(Event{At: now, Kind: EventLoginSucceeded, Account: a})
	}
	if err := r.flush(t.Context(), false); err == nil {
		t.Fatal("the write of the first part did not fail")
	}
	failed := s.tried[len(s.tried)-1]
	if got := strings.Join(s.written, " "); got != "a b" {
		t.Fatalf("written %q before the failure, want the first part, \"a b\"", got)
	}
	if err := r.flush(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	if got := s.tried[len(s.tried)-4]; got != failed {
		t.Errorf("the part that failed went again under %x, want its id %x", got, failed)
	}
	if got, want := strings.Join(s.written, " "), "a b c"; got != want {
		t.Errorf("written %q, want %q: each row once", got, want)
	}
	if got := r.Dropped(); got != 1 {
		t.Errorf("%d dropped, want the poisoned row alone", got)
	}
}

// arrivingCounter counts batches as the Redis counters would, while
// requests go on: each batch it is given, one more event arrives at the
// recorder, as it does under a flood while a flush waits on Redis.
type arrivingCounter struct {
	r       *recorder
	at      time.Time
	batches []int
}

func (c *arrivingCounter) CountEvents(_ context.Context, batch []Event) error {
	c.batches = append(c.batches, len(batch))
	if len(c.batches) < 100 {
		c.r.Record(Event{At: c.at, Kind: EventLoginRejected, Account: "victim@example.com"})
	}
	return nil
}

// TestFlushTakesWhatWasQueued: a flush writes what was queued when it
// began, in as few batches as their bound allows, and leaves what arrives
// meanwhile to the next. Under a flood a flush that chased the arrivals
// would never end and would send Redis a transaction for every few events.
func TestFlushTakesWhatWasQueued(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	c := &arrivingCounter{at: now}
	r := newRecorder(&rowStore{}, c, slog.New(slog.DiscardHandler), func() time.Time { return now })
	c.r = r
	queued := recorderBatch + 10
	for range queued {
		r.Record(Event{At: now, Kind: EventLoginRejected, Account: "victim@example.com"})
	}
	if err := r.flush(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(c.batches), fmt.Sprint([]int{recorderBatch, 10}); got != want {
		t.Errorf("one flush counted batches of %s events, want %s", got, want)
	}
	if got := len(r.queue); got != 2 {
		t.Errorf("%d events left queued, want the 2 that arrived during the flush", got)
	}
}

// TestFinalFlushTakesArrivals: Flush, which a server's shutdown and the
// tests call, writes the events that arrive while it writes too, until
// none is left.
func TestFinalFlushTakesArrivals(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	c := &arrivingCounter{at: now}
	r := newRecorder(&rowStore{}, c, slog.New(slog.DiscardHandler), func() time.Time { return now })
	c.r = r
	r.Record(Event{At: now, Kind: EventLoginRejected, Account: "victim@example.com"})
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(c.batches); got != 100 {
		t.Errorf("Flush counted %d batches, want 100: the first event's and each that arrived after it", got)
	}
	if got := len(r.queue); got != 0 {
		t.Errorf("%d events left queued after Flush, want none", got)
	}
}

// TestShutdownCountsWhatItLoses: when a store is still down as the
// recorder stops, the events it could not write are counted as dropped
// and the log says how many each store lost, not only that writing failed.
func TestShutdownCountsWhatItLoses(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	store := &rowStore{fails: 1 << 30}
	r := newRecorder(store, nopCounter{}, slog.New(slog.NewJSONHandler(&buf, nil)), func() time.Time { return now })
	for _, a := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		r.Record(Event{At: now, Kind: EventLoginSucceeded, Account: a})
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r.Run(ctx)
	if got := r.Dropped(); got != 3 {
		t.Errorf("%d events counted dropped after a shutdown that wrote none of 3 to Postgres, want 3", got)
	}
	var line struct {
		Msg       string `json:"msg"`
		NotStored *int   `json:"not_stored"`
	}
	for l := range strings.Lines(buf.String()) {
		if err := json.Unmarshal([]byte(l), &line); err == nil && line.NotStored != nil {
			break
		}
	}
	if line.NotStored == nil || *line.NotStored != 3 {
		t.Errorf("the shutdown's log does not say that 3 events were not stored:\n%s", buf.String())
	}
}

// TestTrimCountsFoldedEvents: a summary row dropped from Postgres's backlog
// while it is down counts as the events it folds, not as one.
func TestTrimCountsFoldedEvents(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	r := newRecorder(&rowStore{}, nopCounter{}, slog.New(slog.DiscardHandler), func() time.Time { return now })
	backlog := []Event{{At: now, Kind: EventLoginFailed, Source: "192.0.2.0/24", Detail: map[string]string{"count": "500", "folded": "true"}}}
	for range recorderQueue {
		backlog = append(backlog, Event{At: now, Kind: EventLoginSucceeded, Account: "a@example.com"})
	}
	if got := len(r.trim(backlog, 0, recorderQueue, true)); got != recorderQueue {
		t.Fatalf("%d rows kept, want %d", got, recorderQueue)
	}
	if got := r.Dropped(); got != 500 {
		t.Errorf("%d events counted dropped with a summary of 500, want 500", got)
	}
}
