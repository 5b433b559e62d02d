package attack

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/ratelimit"
)

// Deps are what a Watch runs on.
type Deps struct {
	// Redis holds the counts every replica shares and attack mode's state.
	Redis redis.UniversalClient
	// Prefix is the deployment's Redis key namespace (ratelimit.NewKeys).
	Prefix string
	// Events keeps the attack_started and attack_ended events; nil: none
	// are kept.
	Events auth.EventStore
	// Logger is where entering and leaving are logged; nil: nowhere.
	Logger *slog.Logger
	// Metrics is where xcloak_attack_mode is registered; nil: nowhere.
	Metrics prometheus.Registerer
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Watch hears every sign-in attempt and keeps attack mode (see the package
// documentation). Run does its background work.
type Watch struct {
	cfg     Config
	onStart func(ctx context.Context, since time.Time)
	rdb     redis.UniversalClient
	keys    ratelimit.Keys
	events  auth.EventStore
	log     *slog.Logger
	now     func() time.Time

	// active is what Active answers: Redis's state as last read, or true
	// since this replica's own window tripped.
	active atomic.Bool
	wake   chan struct{}
	// ticking makes Ticks one at a time, so that one that returns has
	// seen every count observed before it started.
	ticking sync.Mutex

	mu      sync.Mutex
	local   *Detector
	pending batch
	// sent are the batches that flushes which failed sent, and the newest
	// with them, oldest first: Redis may have applied them, or may yet,
	// so they go again as they were, under their numbers, and flush.lua
	// applies each once. At most maxSent wait; meanwhile pending counts
	// on. flushes is the number of the newest batch; flushedKey, the
	// key of the number of the newest that Redis applied. Only Tick
	// changes them.
	sent       []numbered
	flushes    int64
	flushedKey string
	// hit is the signal that tripped this replica's window and that no
	// Tick has recorded in Redis yet, "" if none; hitAt is when the first
	// trip that no Tick has recorded came, which a start it makes signs
	// out from.
	hit   Trigger
	hitAt time.Time
	// state is attack mode as Redis last said.
	state state
	// baselineSum is the counts of the BaselineSpan, from Redis, and
	// baselineAt the minute it was read in.
	baselineSum Counts
	baselineAt  int64
	// tripper is what Observe checks each attempt's windows against.
	tripper tripper
	// failing reports that the last Tick could not reach Redis, so that
	// an outage is logged once, not every second.
	failing atomic.Bool
	// unanswered is Tick's state.lua call that got no answer, "" if none:
	// Redis may have run it, so the next Tick calls under its token and
	// acts on the change it made as it would have. Only Tick uses it.
	unanswered stateCall
}

// stateCall is a Tick's call of state.lua that went unanswered: its token
// and what the start it may have made is to be recorded with.
type stateCall struct {
	token   string
	signal  Trigger
	tripped time.Time
	figures map[string]string
}

// state is attack mode as Redis keeps it.
type state struct {
	active        bool
	since         time.Time
	trigger, by   string
	suppressUntil time.Time
	// lastHit is the last trip state.lua recorded.
	lastHit time.Time
	// lastLocalTrip is when this replica's own window last tripped.
	lastLocalTrip time.Time
}

// batch is what Observe counted since the last Tick that took a batch.
type batch struct {
	seconds map[int64]*Counts
	minutes map[int64]*minuteBatch
	size    int // accounts and networks held
	room    int // how many it may hold
	// sec and min are the second and minute last added to, and counts
	// and minute their entries: a flood adds to the same ones thousands
	// of times a second, and need not look them up each time.
	sec, min int64
	counts   *Counts
	minute   *minuteBatch
}

type minuteBatch struct {
	all, ordinary Counts
	accounts      map[string]struct{}
	// networks are kept as prefixes (networkOf), named when flushed, so
	// that counting an attempt formats no string.
	networks map[netip.Prefix]struct{}
	// failing counts, by network, attempts that did not succeed.
	failing map[netip.Prefix]int64
}

// Bounds of the keys in Redis and of what a replica holds between flushes.
const (
	// secondRetention keeps a second's counts while a window may read them.
	secondRetention = MaxWindow + time.Minute
	// minuteRetention keeps a minute's panel figures (distinct accounts
	// and networks, ranking) past dashboard.AttackPeriod.
	minuteRetention = 10 * time.Minute
	// countRetention keeps a minute's counts for the panel and while the
	// long window may read them.
	countRetention = MaxLongWindow + time.Minute
	// baselineRetention keeps a minute's ordinary counts for the baseline.
	baselineRetention = BaselineSpan + 10*time.Minute
	// stateRetention keeps attack mode's state; every Tick renews it.
	stateRetention = 48 * time.Hour
	// rankCap bounds the networks one minute's ranking keeps, and those
	// of a batch sent to it; under a flood from more, a network new to a
	// full ranking takes the place of the lowest, with its count
	// (Space-Saving, flush.lua), so that a network failing a little every
	// second is not dropped each time. A count is then at most what it
	// inherited above the network's own, and a network's failures in a
	// batch where 200 others failed more are not sent: the ranking is the
	// panel's view of the heavy hitters, not an exact count.
	rankCap = 200
	// maxPendingMembers bounds the accounts and networks a replica holds
	// between flushes that reach Redis, the batches that wait to be sent
	// again included; past it they are not added to the distinct counts
	// (the counts of attempts stay exact).
	maxPendingMembers = 200_000
	// maxSent bounds the batches that wait to be sent again after flushes
	// failed (Watch.sent): past it, after as many failed ticks in a row,
	// what comes since is sent a tick after they are through.
	maxSent = 8
	// topNetworks is how many networks the panel lists.
	topNetworks = 10
	// tickEvery is how often Run flushes and reads the shared counts.
	tickEvery = time.Second
)

// watchID is the one identity the watch's keys belong to: they share a
// hash tag and so one Redis Cluster slot.
const watchID = "watch"

// New returns a Watch with cfg on d.
func New(cfg Config, d Deps) (*Watch, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Redis == nil {
		return nil, errors.New("attack: Redis is required")
	}
	keys, err := ratelimit.NewKeys(d.Prefix, "attack")
	if err != nil {
		return nil, err
	}
	w := &Watch{
		cfg: cfg, rdb: d.Redis, keys: keys, events: d.Events, log: d.Logger, now: d.Now,
		wake: make(chan struct{}, 1), local: NewDetector(cfg), baselineAt: -1,
		flushedKey: keys.Key(watchID, ":f:"+rand.Text()),
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.now == nil {
		w.now = time.Now
	}
	w.pending = newBatch(maxPendingMembers)
	if d.Metrics != nil {
		gauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "xcloak_attack_mode", Help: "1 while attack mode is on (automatically or by an administrator), else 0."},
			func() float64 {
				if w.Active() {
					return 1
				}
				return 0
			})
		if err := d.Metrics.Register(gauge); err != nil {
			return nil, fmt.Errorf("attack: registering metrics: %w", err)
		}
	}
	return w, nil
}

// atLeast returns the larger of a and b, count by count.
func atLeast(a, b Counts) Counts {
	return Counts{max(a.Attempts, b.Attempts), max(a.Failures, b.Failures), max(a.Unknown, b.Unknown),
		max(a.Rejected, b.Rejected), max(a.Held, b.Held), max(a.Successes, b.Successes), max(a.Steps, b.Steps)}
}

func newBatch(room int) batch {
	return batch{seconds: map[int64]*Counts{}, minutes: map[int64]*minuteBatch{}, room: room}
}

// Active reports whether attack mode is on. It is an atomic load.
func (w *Watch) Active() bool { return w.active.Load() }

// Observe counts one attempt. It never blocks on I/O: when this replica's
// own window trips, attack mode is on here at once and Run records it in
// Redis without waiting for its next tick.
func (w *Watch) Observe(a auth.SignInAttempt) {
	w.mu.Lock()
	defer w.mu.Unlock()
	active := w.active.Load()
	w.local.Add(a.At, a.Outcome, !active)
	w.pending.add(a, !active)
	// Once Redis says attack mode is on, its ticks keep it on. On only
	// here, from this replica's own window, each trip counts: while
	// Redis does not answer, attack mode here lasts the quiet period
	// from the last of them.
	if (active && w.state.active) || a.At.Before(w.state.suppressUntil) {
		return
	}
	// The shared baseline is all replicas' traffic, at least this one's:
	// a replica started a moment ago, with no history of its own, is held
	// to the deployment's thresholds, not to the bare floors.
	w.tripper = w.cfg.tripperFor(w.tripper, atLeast(w.local.baselineSumAt(a.At), w.baselineSum))
	if trig, ok := w.cfg.trip(w.tripper, w.local.Window(a.At), w.local.LongWindow(a.At)); ok {
		if w.hit == "" {
			w.hitAt = a.At
		}
		w.hit = trig
		w.state.lastLocalTrip = a.At
		w.active.Store(true)
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (b *batch) add(a auth.SignInAttempt, ordinary bool) {
	sec := a.At.Unix()
	c := b.counts
	if c == nil || sec != b.sec {
		c = b.seconds[sec]
		if c == nil {
			c = &Counts{}
			b.seconds[sec] = c
		}
		b.sec, b.counts = sec, c
	}
	c.Add(a.Outcome)
	m := b.minute
	if m == nil || sec/60 != b.min {
		m = b.minutes[sec/60]
		if m == nil {
			m = &minuteBatch{accounts: map[string]struct{}{}, networks: map[netip.Prefix]struct{}{}, failing: map[netip.Prefix]int64{}}
			b.minutes[sec/60] = m
		}
		b.min, b.minute = sec/60, m
	}
	m.all.Add(a.Outcome)
	if ordinary {
		m.ordinary.Add(a.Outcome)
	}
	network := networkOf(a.Client.Addr)
	_, known := m.networks[network]
	if b.size < b.room {
		if a.Account != "" {
			if _, ok := m.accounts[a.Account]; !ok {
				m.accounts[a.Account] = struct{}{}
				b.size++
			}
		}
		if !known {
			m.networks[network] = struct{}{}
			b.size++
			known = true
		}
	}
	// A full batch still counts the failures of the networks it holds:
	// a flood of fresh accounts that fills it must not stop the ranking
	// of those that were there.
	if known && a.Outcome != auth.OutcomeSucceeded {
		m.failing[network]++
	}
}

// Network is the network an address is counted in: its IPv4 /24 or IPv6
// /48, "unknown" without an address. An IPv6 address that stands for an
// IPv4 one (auth.CountedAddr) is in that address's /24.
func Network(addr netip.Addr) string {
	return networkName(networkOf(addr))
}

// networkOf is the network an address is counted in, as a prefix: the
// zero Prefix without an address.
func networkOf(addr netip.Addr) netip.Prefix {
	if !addr.IsValid() {
		return netip.Prefix{}
	}
	addr = auth.CountedAddr(addr)
	bits := 48
	if addr.Is4() {
		bits = 24
	}
	p, _ := addr.Prefix(bits)
	return p
}

// networkName is Network's name for a network of networkOf.
func networkName(p netip.Prefix) string {
	if !p.IsValid() {
		return "unknown"
	}
	return p.String()
}

// Run ticks about once a second, and at once when this replica's window
// trips, until ctx is done; then it flushes what it counted and returns.
func (w *Watch) Run(ctx context.Context) {
	t := time.NewTicker(tickEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = w.Tick(final)
			cancel()
			return
		case <-t.C:
		case <-w.wake:
		}
		_ = w.Tick(ctx)
	}
}

// Tick adds what this replica counted to the shared counts, reads the
// window of all replicas, and enters or leaves attack mode. Run calls it;
// tests call it with their own clock.
//
// What a flush that failed sent waits, under its number, for the next
// that reaches Redis, which applies it once whether the failed one had
// applied it or not (flush.lua); so does this replica's trip until
// state.lua has recorded it. Meanwhile what it holds stays bounded: at
// most maxSent batches wait, after which Observe counts on in the next,
// all of them hold at most maxPendingMembers accounts and networks, and
// each Tick forgets the seconds and minutes that no key would keep.
func (w *Watch) Tick(ctx context.Context) error {
	w.ticking.Lock()
	defer w.ticking.Unlock()
	now := w.now()
	w.mu.Lock()
	w.pending.dropStale(now)
	for i := range w.sent {
		w.sent[i].b.dropStale(now)
	}
	if len(w.sent) < maxSent && len(w.pending.seconds) > 0 {
		w.flushes++
		w.sent = append(w.sent, numbered{n: w.flushes, b: w.pending})
		w.pending = newBatch(maxPendingMembers - w.sentMembers())
	}
	hit, tripped, known := w.hit, w.hitAt, w.state
	readBaseline := w.baselineAt != now.Unix()/60
	w.mu.Unlock()

	windows, long, sum, written, err := w.flush(ctx, w.sent, now, readBaseline)
	if written && len(w.sent) > 0 {
		w.mu.Lock()
		w.sent = nil
		w.pending.room = maxPendingMembers
		w.mu.Unlock()
	}
	if err != nil {
		return w.failed(now, err)
	}
	w.mu.Lock()
	if readBaseline {
		w.baselineSum, w.baselineAt = sum, now.Unix()/60
	}
	sum = w.baselineSum
	w.mu.Unlock()
	sig := w.cfg.signals(windows[0], long, sum)
	var trig Trigger
	ok := false
	// Each window of whole seconds that every replica has flushed is
	// checked by some Tick (settledWindows).
	for _, window := range windows {
		if trig, ok = w.cfg.Trip(window, sig.Baseline); ok {
			sig.Window = window
			break
		}
	}
	if !ok {
		trig, ok = w.cfg.TripLong(sig.LongWindow, sig.LongBaseline)
	}
	signal := hit
	if ok && hit == "" {
		signal = trig
	}
	op := "tick"
	if signal != "" {
		op = "hit"
	}
	if hit == "" {
		// No trip of this replica's window waits: the shared window's,
		// if any, is of now.
		tripped = time.Time{}
		if signal != "" {
			tripped = now
		}
	}
	figures := eventFigures(signal, sig, w.cfg)
	if prev := w.unanswered; prev.token != "" && prev.signal == "" && signal != "" {
		// The call unanswered was a "tick", which may have ended attack
		// mode. Sent again as this tick's "hit" under its name, it would
		// start attack mode anew as if it were the call that ended it,
		// and no replica would record the end: it goes again as it was,
		// and the trip in a call of its own.
		res, err := w.runState(ctx, "tick", now, "", known, prev.token)
		if err != nil {
			return w.failed(now, err)
		}
		w.unanswered = stateCall{}
		w.apply(ctx, res, now, "", time.Time{}, nil)
		w.mu.Lock()
		known = w.state
		w.mu.Unlock()
	}
	call := w.unanswered
	if call.token == "" {
		call = stateCall{token: rand.Text(), signal: signal, tripped: tripped, figures: figures}
	}
	if call.signal != "" {
		// The call sent again carries the trip it was sent with, which
		// may not have reached Redis: the shared window that tripped may
		// since have moved past the attack, and only this call records it.
		op = "hit"
	}
	res, err := w.runState(ctx, op, now, "", known, call.token)
	if err != nil {
		// Sent again, under its token, by the next Tick.
		w.unanswered = call
		return w.failed(now, err)
	}
	w.unanswered = stateCall{}
	if call.signal != "" {
		// The start, if the call unanswered made it, is that call's.
		signal, tripped, figures = call.signal, call.tripped, call.figures
	}
	if w.failing.Swap(false) {
		w.log.Info("attack watch: Redis answers again")
	}
	w.mu.Lock()
	if hit != "" && !w.state.lastLocalTrip.After(now) {
		w.hit, w.hitAt = "", time.Time{} // recorded: state.lua took now as its last trip
	}
	w.mu.Unlock()
	w.apply(ctx, res, now, signal, tripped, figures)
	return nil
}

// sentMembers is how many accounts and networks the batches of w.sent
// hold. w.mu is held.
func (w *Watch) sentMembers() int {
	n := 0
	for _, s := range w.sent {
		n += s.b.size
	}
	return n
}

// dropStale forgets the seconds and minutes of b that no key in Redis
// would keep any longer at now, should a flush write them.
func (b *batch) dropStale(now time.Time) {
	dropped := false
	for sec := range b.seconds {
		if sec < now.Add(-secondRetention).Unix() {
			delete(b.seconds, sec)
			dropped = true
		}
	}
	for min, m := range b.minutes {
		if min < now.Add(-baselineRetention).Unix()/60 {
			b.size -= len(m.accounts) + len(m.networks)
			delete(b.minutes, min)
			dropped = true
		}
	}
	if dropped {
		b.counts, b.minute = nil, nil
	}
}

// failed keeps attack mode as this replica last knew it while Redis does
// not answer; one that only this replica's window switched on ends the
// quiet period after its last trip.
func (w *Watch) failed(now time.Time, err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.failing.Swap(true) {
		w.log.Warn("attack watch: Redis unavailable; attack mode stays as this replica knows it", "err", err)
	}
	if w.active.Load() && !w.state.active && now.Sub(w.state.lastLocalTrip) >= w.cfg.Quiet {
		w.active.Store(false)
		w.hit, w.hitAt = "", time.Time{} // its attack ended before Redis could hear of it
	}
	return err
}

// apply takes the state Redis returned as this replica's and, when it
// changed, records the change. tripped is when this replica's own window
// or the shared one tripped, if the change records that trip; else zero.
func (w *Watch) apply(ctx context.Context, res stateResult, now time.Time, signal Trigger, tripped time.Time, figures map[string]string) {
	w.mu.Lock()
	s := res.state
	s.lastLocalTrip = w.state.lastLocalTrip
	w.state = s
	// A trip of this replica's window since the script ran keeps attack
	// mode on here until the next Tick records it.
	w.active.Store(s.active || w.hit != "")
	w.mu.Unlock()

	switch res.change {
	case "started":
		detail := map[string]string{"trigger": s.trigger, "by": s.by}
		if s.trigger == "automatic" {
			for k, v := range figures {
				detail[k] = v
			}
		}
		w.log.Warn("attack mode on", "trigger", s.trigger, "by", s.by, "detail", detail)
		w.record(ctx, auth.Event{At: now, Kind: auth.EventAttackStarted, Detail: detail})
		if w.onStart != nil && s.trigger == "automatic" {
			// Exactly one replica gets "started": it alone acts on it.
			// An administrator's "on" answers what the administrator saw,
			// not sign-ins the detector was about to catch.
			// A trip that waited for Redis to answer (a failover under
			// the flood) started the attack before the tick that records
			// it: the browsers of its lookback signed in before the trip.
			from := s.since
			if !tripped.IsZero() && tripped.Before(from) {
				from = tripped
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			w.onStart(ctx, from.Add(-w.cfg.lookback(signal)))
			cancel()
		}
	case "ended":
		// The attack the end ended, which another replica's trip may
		// have followed with a new one before this call heard of it.
		e := res.ended
		if e.since.IsZero() {
			e = s // kept by a version that did not keep the end apart
		}
		detail := map[string]string{"trigger": e.trigger, "by": e.by, "since": e.since.Format(time.RFC3339)}
		w.log.Warn("attack mode off", "by", e.by, "since", e.since, "lasted_seconds", now.Sub(e.since).Round(time.Second).Seconds())
		w.record(ctx, auth.Event{At: now, Kind: auth.EventAttackEnded, Detail: detail})
	}
}

func (w *Watch) record(ctx context.Context, e auth.Event) {
	if w.events == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// Tried again under the same id while the time lasts: a write whose
	// answer was lost is found written, and stored, logged and sent once.
	id := auth.NewEventBatchID()
	for {
		err := w.events.InsertEvents(ctx, id, []auth.Event{e})
		if err == nil {
			return
		}
		if errors.Is(err, auth.ErrEventsRefused) {
			// Refused for what it holds: no retry changes that.
			w.log.Error("attack watch: event refused by the store; dropped", "kind", e.Kind, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			w.log.Error("attack watch: recording event", "kind", e.Kind, "err", err)
			return
		case <-time.After(recordRetry):
		}
	}
}

// recordRetry is the wait before an event the watch could not write is
// tried again.
const recordRetry = 250 * time.Millisecond

// eventFigures are the detail of an automatic attack_started event: the
// counts of the window whose signal tripped.
func eventFigures(signal Trigger, sig Signals, cfg Config) map[string]string {
	window, span := sig.Window, cfg.Window
	if signal == TripLongFailures || signal == TripLongUnknownAccounts {
		window, span = sig.LongWindow, cfg.LongWindow
	}
	return map[string]string{
		"signal":           string(signal),
		"window":           span.String(),
		"attempts":         strconv.FormatInt(window.Attempts, 10),
		"failures":         strconv.FormatInt(window.Failures, 10),
		"unknown_accounts": strconv.FormatInt(window.Unknown, 10),
	}
}

// OnStart has f called, by the one replica that records it, each time
// the detector switches attack mode on, with the time Config.Lookback
// (the long window, when its signal tripped)
// before it. Set it before Run.
func (w *Watch) OnStart(f func(ctx context.Context, since time.Time)) { w.onStart = f }

// SwitchAttack turns attack mode on or off in by's name. On stays on
// until an administrator turns it off; off also keeps the detector from
// switching it on again for the quiet period. It reports whether attack
// mode changed.
func (w *Watch) SwitchAttack(ctx context.Context, on bool, by string) (bool, error) {
	op := "off"
	if on {
		op = "on"
	}
	now := w.now()
	w.mu.Lock()
	known := w.state
	w.mu.Unlock()
	res, err := w.runState(ctx, op, now, by, known, rand.Text())
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	if !on {
		w.hit, w.hitAt = "", time.Time{} // this replica's trip is overruled
	}
	w.mu.Unlock()
	w.apply(ctx, res, now, "", time.Time{}, nil)
	if res.change == "" {
		// Nothing started or ended, but the switch still changed what
		// attack mode does: it is recorded like every administrator's act.
		w.record(ctx, auth.Event{At: now, Kind: auth.EventAttackSwitched, Detail: map[string]string{"mode": op, "by": by}})
	}
	return res.change != "", nil
}
