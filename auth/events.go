package auth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Event kinds.
const (
	EventLoginSucceeded = "login_succeeded"
	EventLoginFailed    = "login_failed"
	EventLoginRejected  = "login_rejected" // Rule says which limit, or "lockout"
	EventLoginInvalid   = "login_invalid"  // malformed request
	// EventLoginUnavailable: an attempt that could not be decided because
	// a store or the hashing pool was unavailable (answered 503).
	EventLoginUnavailable = "login_unavailable"
	EventNewDevice        = "new_device" // sign-in from a browser without a device cookie
	EventLockout          = "lockout"
	EventUnlock           = "unlock"
	EventResetRequested   = "reset_requested"
	EventResetRejected    = "reset_rejected"
	EventResetCompleted   = "reset_completed"
	// EventResetMailDropped: an accepted reset request whose mail was not
	// sent; Detail "reason" says why (see the dropReason constants).
	EventResetMailDropped = "reset_mail_dropped"
	// EventPasswordSprayed: a password failed on so many accounts that it
	// is refused for all (RuleLoginPassword); Detail has the accounts and
	// until when, never the password.
	EventPasswordSprayed = "password_sprayed"
)

// Account administration (names the dashboard, the command
// line, the audit stream and webhooks share). Detail "by" is who did it:
// an administrator's email after "admin:" ("admin:ann@example.com", as
// the dashboard's unlock and sign-out write it), "cli" for the command
// line, or "dev" for the demo admin of development mode.
const (
	// EventUserCreated: an account was made with a password; Detail
	// "role" is "admin" or "member".
	EventUserCreated  = "user_created"
	EventUserDisabled = "user_disabled"
	EventUserEnabled  = "user_enabled"
	EventUserDeleted  = "user_deleted"
	EventUserPromoted = "user_promoted"
	EventUserDemoted  = "user_demoted"
	// EventPasswordSet: an account was given a new password by someone
	// other than its owner (development mode's demo admin at each start):
	// its sessions ended and its known devices were forgotten.
	EventPasswordSet = "password_set"
	// EventEventsExported: an administrator downloaded the event search's
	// export (RecordExport), addresses and networks of up to 100,000
	// events: Detail "rows", and "account", "network", "kind" for the
	// filters given.
	EventEventsExported = "events_exported"
)

// RuleLockout is the Rule of a rejection caused by a lockout.
const RuleLockout = "lockout"

// Event is one security-relevant decision.
type Event struct {
	At      time.Time
	Kind    string
	Account string // normalised email, existing or not; "" if none
	UserID  int64  // 0 if no account
	Source  string // the client's network (address or IPv6 /64)
	Rule    string // the rule that rejected, for rejections
	// Detail is what else the dashboard shows of the event. It goes to
	// the audit stream too, so it never holds a secret: no password,
	// token, hash, cookie or attempt ID.
	Detail map[string]string
}

// EventStore keeps security events for the log the dashboard lists
// (package postgres keeps them in Postgres).
type EventStore interface {
	// InsertEvents writes a batch in one step, under id. When it fails,
	// the batch may have been written (only the answer lost): given the
	// same id and batch again, it writes nothing more and succeeds.
	InsertEvents(ctx context.Context, id EventBatchID, batch []Event) error
}

// ErrEventsRefused is the answer of an EventStore that refused a batch
// for what a row holds (Postgres's data errors and constraint violations),
// which no retry of the same rows can change. Transient failures (a
// connection lost, a timeout, Postgres shutting down) are not it.
var ErrEventsRefused = errors.New("auth: security events refused by the store")

// EventBatchID names a batch of security events, so that the store can
// tell a batch it wrote already from a new one.
type EventBatchID [16]byte

// NewEventBatchID returns a random EventBatchID.
func NewEventBatchID() EventBatchID {
	var id EventBatchID
	rand.Read(id[:]) // never fails
	return id
}

// EventCounter counts security events in the shared counters the
// dashboard reads (package counters keeps them in Redis).
type EventCounter interface {
	// CountEvents counts a batch once. When it fails, the batch may have
	// been counted (only the answer lost): given the same batch again,
	// and no other first, it counts what it had not.
	CountEvents(ctx context.Context, batch []Event) error
}

// recorder keeps security events off the request path: Record queues an
// event without waiting, and Run writes queued events in batches, to the
// EventStore (Postgres, one COPY per batch) and to the EventCounter (the
// per-minute counters in Redis that the dashboard reads, one transaction
// per batch). So a
// rejected request costs its one Redis round trip and nothing more, and
// every replica's events land in the same shared stores.
//
// The counters count every event. The rows are bounded per client network
// and minute (see EventRowsPerNetwork), so that no client fills the
// database at the rate it sends, whatever it sends.
type recorder struct {
	store   EventStore
	stats   EventCounter
	log     *slog.Logger
	now     func() time.Time
	queue   chan Event
	dropped atomic.Int64

	flushMu      sync.Mutex
	budget       eventBudget
	pendingStats []Event // not yet counted in Redis
	// unsureStats is how many of pendingStats, the first, a CountEvents
	// that failed was given: they go again alone, as they were.
	unsureStats int
	pendingDB   []Event // not yet written to Postgres
	// dbBatches are the batches made of pendingDB's rows and not yet
	// written, oldest first, each under its id. The first is the one an
	// InsertEvents that failed was given: Postgres may have written it,
	// so it goes again alone, under its id and as it was, until it is
	// written or abandoned. Those after it are the parts of a batch
	// Postgres refused for good (see writeBatches). Rows that arrive
	// meanwhile go in later batches.
	dbBatches []eventBatch
}

// eventBatch is a batch of rows for Postgres under its id.
type eventBatch struct {
	id   EventBatchID
	rows []Event
}

// eventBatchRows bounds the events of one batch written to Postgres:
// after an outage the backlog, up to recorderQueue, goes in batches that
// each take a short while, rather than in one whose single transaction
// could outlast the flush's time again and again.
const eventBatchRows = 8192

// recorderQueue bounds memory under a flood: past it, events are dropped
// and counted rather than slowing requests down.
const recorderQueue = 65536

// summaryGrace is how long after the end of a minute its summaries are
// written, so that events queued just before the minute ended still find
// their network's budget.
const summaryGrace = 5 * time.Second

// newRecorder returns a recorder writing to store and stats; now is the
// clock of the events' timestamps (nil means time.Now).
func newRecorder(store EventStore, stats EventCounter, log *slog.Logger, now func() time.Time) *recorder {
	if now == nil {
		now = time.Now
	}
	return &recorder{store: store, stats: stats, log: log, now: now, queue: make(chan Event, recorderQueue)}
}

// Record queues e. It never blocks.
func (r *recorder) Record(e Event) {
	select {
	case r.queue <- e:
	default:
		if r.dropped.Add(1)%1000 == 1 {
			r.log.Warn("security event queue full; dropping events", "dropped_total", r.dropped.Load())
		}
	}
}

// Dropped returns how many events were dropped: because the queue or a
// store's backlog was full, because Postgres refused their row for good,
// or because they were left unwritten at shutdown.
func (r *recorder) Dropped() int64 { return r.dropped.Load() }

// Run writes queued events until ctx is done, then writes what is still
// queued before returning, so that a graceful shutdown loses nothing.
func (r *recorder) Run(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := r.Flush(final); err != nil {
				notStored, notCounted := r.abandon()
				r.log.Error("writing security events at shutdown; the events not written are lost",
					"err", err, "not_stored", notStored, "not_counted", notCounted)
			}
			return
		case <-tick.C:
			// Not ctx: a write cancelled half-way at shutdown may have
			// reached Postgres and then be written again by the final
			// flush. A flush in progress finishes; the loop then stops.
			flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if err := r.flush(flush, false); err != nil {
				r.log.Error("writing security events", "err", err)
			}
			cancel()
		}
	}
}

// Flush writes every event queued so far, with the summaries of minutes
// that are not over yet. Each store keeps its own backlog: if Postgres is
// down, its events wait for the next flush while the counters in Redis go
// on (and the other way round), and neither store gets an event twice.
func (r *recorder) Flush(ctx context.Context) error { return r.flush(ctx, true) }

// flush writes the events queued so far and the summaries of the minutes
// that are over, or of every minute if all is set.
func (r *recorder) flush(ctx context.Context, all bool) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	// What is queued now, not what arrives while it is written: under a
	// flood, a flush that took each arrival would never end, and would
	// send Redis a transaction for every few events. The arrivals wait
	// for the next flush, but for Flush's, which ends a server's or a
	// test's writing: it takes them too, until none is left.
	queued := len(r.queue)
	for {
		if queued == 0 && all {
			queued = len(r.queue)
		}
		batch := r.take(min(queued, recorderBatch))
		queued -= len(batch)
		r.pendingStats = append(r.pendingStats, batch...)
		r.pendingDB = append(r.pendingDB, r.budget.admit(batch)...)
		if len(batch) == 0 {
			r.pendingDB = append(r.pendingDB, r.budget.close(unixMinute(r.now().Add(-summaryGrace)), all)...)
		}
		var errs []error
		for len(r.pendingStats) > 0 {
			n := len(r.pendingStats)
			if r.unsureStats > 0 {
				n = r.unsureStats
			}
			if err := r.stats.CountEvents(ctx, r.pendingStats[:n]); err != nil {
				r.unsureStats = n
				errs = append(errs, fmt.Errorf("counting events in Redis: %w", err))
				break
			}
			r.pendingStats = append(r.pendingStats[:0], r.pendingStats[n:]...)
			r.unsureStats = 0
		}
		if err := r.writeBatches(ctx); err != nil {
			errs = append(errs, fmt.Errorf("writing events to Postgres: %w", err))
		}
		if len(errs) > 0 {
			r.pendingStats = r.trim(r.pendingStats, r.unsureStats, recorderQueue, false)
			// The batches that go again count against the bound, and
			// are the oldest: past the bound they are dropped first, as
			// the oldest rows always were, so that a batch Postgres
			// fails with an error that never clears cannot hold back
			// every row after it. Their ids are never written again.
			held := 0
			for _, b := range r.dbBatches {
				held += len(b.rows)
			}
			for len(r.dbBatches) > 0 && held+len(r.pendingDB) > recorderQueue {
				for _, e := range r.dbBatches[0].rows {
					r.dropped.Add(int64(eventCount(e)))
				}
				held -= len(r.dbBatches[0].rows)
				r.dbBatches = r.dbBatches[1:]
			}
			r.pendingDB = r.trim(r.pendingDB, 0, recorderQueue-held, true)
			return errors.Join(errs...)
		}
		if len(batch) == 0 {
			return nil
		}
	}
}

// writeBatches writes dbBatches, then pendingDB's rows in batches of
// eventBatchRows at most, until a write fails.
//
// A batch Postgres refuses for good (ErrEventsRefused) is refused for what
// some row of it holds, and so again at every try: rather than hold back
// its other rows and every row after it, and be dropped whole once the
// backlog reaches its bound, it is split in halves, each written under an
// id of its own, and a half refused is split again. So the good rows are
// written at once, and only a row refused alone is dropped. The refusal
// rolled the batch back, its id with it, so its rows can go under new ids;
// each part keeps its id until it is written, so that a part whose write
// fails goes again as a batch that failed always does, and is never
// written twice. A batch whose every row is refused (a constraint its
// rows all break) costs two writes a row; a flush whose time runs out on
// the way leaves the parts not yet written for the next.
func (r *recorder) writeBatches(ctx context.Context) error {
	for len(r.dbBatches) > 0 || len(r.pendingDB) > 0 {
		if len(r.dbBatches) == 0 {
			n := min(len(r.pendingDB), eventBatchRows)
			r.dbBatches = append(r.dbBatches, eventBatch{NewEventBatchID(), coalesceRejections(r.pendingDB[:n])})
			r.pendingDB = append(r.pendingDB[:0], r.pendingDB[n:]...)
		}
		b := r.dbBatches[0]
		err := r.store.InsertEvents(ctx, b.id, b.rows)
		switch {
		case err == nil:
			r.dbBatches = r.dbBatches[1:]
		case !errors.Is(err, ErrEventsRefused):
			return err
		case len(b.rows) > 1:
			half := len(b.rows) / 2
			r.dbBatches = append([]eventBatch{{NewEventBatchID(), b.rows[:half]}, {NewEventBatchID(), b.rows[half:]}}, r.dbBatches[1:]...)
		default:
			e := b.rows[0]
			r.dropped.Add(int64(eventCount(e)))
			// Kind and time say which event was lost; the account,
			// source and detail stay out of the log, as the error does
			// not hold them either.
			r.log.Error("security event refused by Postgres; dropped", "kind", e.Kind, "at", e.At, "events", eventCount(e), "err", err)
			r.dbBatches = r.dbBatches[1:]
		}
	}
	return nil
}

// abandon gives up, at shutdown, the events a failed Flush left unwritten,
// and counts them as dropped: notStored never reached Postgres (rows that
// fold several count them all), notCounted never reached the counters in
// Redis. Without it, the loss would show only as a failed write, of
// unknown size.
func (r *recorder) abandon() (notStored, notCounted int) {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	queued := len(r.take(len(r.queue)))
	notCounted = len(r.pendingStats) + queued
	notStored = queued
	for _, b := range r.dbBatches {
		for _, e := range b.rows {
			notStored += eventCount(e)
		}
	}
	for _, e := range slices.Concat(r.pendingDB, r.budget.close(math.MaxInt64, true)) {
		notStored += eventCount(e)
	}
	r.pendingStats, r.pendingDB, r.unsureStats, r.dbBatches = nil, nil, 0, nil
	r.dropped.Add(int64(notStored + notCounted))
	return notStored, notCounted
}

// trim bounds a backlog to bound while a store is down, dropping the
// oldest events after its first keep, which go again as they were. In a
// backlog of rows (folded), a dropped summary counts as the events it
// folds.
func (r *recorder) trim(backlog []Event, keep, bound int, folded bool) []Event {
	if over := min(len(backlog)-bound, len(backlog)-keep); over > 0 {
		n := over
		if folded {
			n = 0
			for _, e := range backlog[keep : keep+over] {
				n += eventCount(e)
			}
		}
		r.dropped.Add(int64(n))
		backlog = append(backlog[:keep], backlog[keep+over:]...)
	}
	return backlog
}

// recorderBatch is the most events a flush takes from the queue at a time:
// each batch costs a transaction in Redis and a COPY in Postgres, so a
// batch holds a flood's few thousand events of a tick in a few. It is no
// larger because the transaction counts each distinct account and source
// with commands of its own, on the Redis the limits share: a distributed
// flood's batch of 2,048 events is at most some 8,000 commands, which
// Redis runs in one go while the limits' scripts wait.
const recorderBatch = 2048

// take returns up to n queued events.
func (r *recorder) take(n int) []Event {
	batch := make([]Event, 0, min(n, len(r.queue)))
	for len(batch) < n {
		select {
		case e := <-r.queue:
			batch = append(batch, e)
		default:
			return batch
		}
	}
	return batch
}

// coalesceRejections folds the rejections of one batch that share kind,
// account, source and rule into one row whose detail says how many there
// were ("count") and when the last was ("last"). A flood against one
// account from one network is then a few rows a second, not one per
// request: the log keeps every rejection counted without letting an
// attacker fill the database at the rate he sends. A row that already
// stands for several (a summary of the event budget) adds its count.
// Other events, and the order of the rows, are kept.
func coalesceRejections(batch []Event) []Event {
	type key struct{ kind, account, source, rule string }
	first := map[key]int{} // index in out
	counts := map[key]int{}
	out := make([]Event, 0, len(batch))
	for _, e := range batch {
		if e.Kind != EventLoginRejected && e.Kind != EventResetRejected {
			out = append(out, e)
			continue
		}
		k := key{e.Kind, e.Account, e.Source, e.Rule}
		i, seen := first[k]
		if !seen {
			first[k] = len(out)
			counts[k] = eventCount(e)
			out = append(out, e)
			continue
		}
		counts[k] += eventCount(e)
		detail := make(map[string]string, len(out[i].Detail)+2)
		for name, v := range out[i].Detail {
			detail[name] = v
		}
		detail["count"] = strconv.Itoa(counts[k])
		last := e.At
		if l, err := time.Parse(time.RFC3339Nano, e.Detail["last"]); err == nil {
			last = l
		}
		if prev, err := time.Parse(time.RFC3339Nano, detail["last"]); err != nil || last.After(prev) {
			detail["last"] = last.UTC().Format(time.RFC3339Nano)
		}
		out[i].Detail = detail
	}
	return out
}
