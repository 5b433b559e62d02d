package ratelimit

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// FailurePolicy says what limits do while Redis cannot be reached.
type FailurePolicy string

const (
	// FailLocal keeps every replica limiting on its own, in process, with
	// the same rules. The default: login stays protected and available.
	FailLocal FailurePolicy = "local"
	// FailClosed refuses every decision with ErrRedisUnavailable (the
	// service answers 503): nothing is admitted without the shared limits.
	FailClosed FailurePolicy = "closed"
	// FailOpen admits every request, logging loudly: availability over
	// protection, for those who choose it knowingly. A failure is counted
	// nowhere and locks nothing.
	FailOpen FailurePolicy = "open"
)

// ParseFailurePolicy reads "local", "closed" or "open".
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	switch p := FailurePolicy(s); p {
	case FailLocal, FailClosed, FailOpen:
		return p, nil
	}
	return "", fmt.Errorf("ratelimit: failure policy %q: want local, closed or open", s)
}

// ErrRedisUnavailable is returned under FailClosed while Redis is down.
var ErrRedisUnavailable = errors.New("ratelimit: redis unavailable")

// Failover is a [Store] that puts a FailurePolicy in front of a shared
// store (a [RedisStore]), with an in-process one (a [Local]) to serve under
// FailLocal; it reaches both through the Store contract only. The first
// Redis outage (IsOutage: not a cancelled request, not
// an ordinary error reply) switches it to degraded mode: from then
// on it does not wait for Redis on every request but applies the policy at
// once, while a probe pings Redis a few times a second. When Redis answers
// again (after a restart that lost the scripts too: they are reloaded on
// first use), the shared limits take over by themselves.
type Failover struct {
	shared Store
	local  Store
	// rdb is the shared store's Redis, which Check pings.
	rdb Pinger
	// pinger is what the probes ping: rdb, or a client of its own
	// (SetProbeClient) whose few connections no queue of decisions holds.
	pinger  Pinger
	policy  FailurePolicy
	log     *slog.Logger
	timeout time.Duration

	degraded atomic.Bool
	// outages counts the outages begun (trip), each after degraded is
	// set: the watch of restarts (WatchRestarts) that finds it changed
	// since its last look knows that a failback may have given the
	// lockouts in force to a server it has not seen yet.
	outages atomic.Uint64
	// back is what the last failback left the watch of restarts to know:
	// when it had put the lockouts in force back into Redis, and to which
	// server process. It is stored before degraded is cleared, so that a
	// watch that finds an outage over reads its failback's, or a later
	// one's.
	back atomic.Pointer[failbackMark]
	// watching is set once WatchRestarts watches: only then does a
	// failback look at the server it gives the locks to.
	watching atomic.Bool
	// restored is closed once the lockouts in force are in local after
	// the current outage began; local decisions wait for it.
	restored atomic.Pointer[chan struct{}]
	// locksMissing is set while the lockouts in force could not be loaded.
	locksMissing atomic.Bool
	probeMu      sync.Mutex
	probing      bool
	// confirming is set while a probe checks whether a slow answer was
	// Redis gone (see IsSlow).
	confirming bool
	// lastBack is when the last failback handed the limits to Redis,
	// and backWait the wait the probe had come to before it (probeMu):
	// the probe of an outage begun soon after goes on from it.
	lastBack time.Time
	backWait time.Duration
	stop     chan struct{}
	stopOnce sync.Once
	// Restore, if set before use, lists the lockouts in force from a
	// store that outlives Redis (Postgres). Under FailLocal they are
	// held in the in-process store each time Redis is lost, so that an
	// identity locked in Redis stays locked during the outage, and in the
	// shared store when Redis is back.
	Restore func(context.Context) ([]HeldLock, error)
	// OnChange, if set before use, is called with true when Redis is lost
	// and false when it is back (for metrics).
	OnChange func(degraded bool)
	// OnRedisError, if set before use, is called for every failed Redis
	// call (for metrics).
	OnRedisError func(error)
	openLog      atomic.Int64 // unix second of the last "failing open" log line

	// localMu is held for reading by each failure decided in process,
	// from its check that Redis is still away to its note in made, and
	// for writing by the failback once Redis decides again: what it then
	// finds in made is every lock made in process.
	localMu sync.RWMutex
	madeMu  sync.Mutex
	// made are the locks made in process during the outage, which Redis
	// learns of before it decides again (the lockout log has some of
	// them, but the service may not have written them there yet), and
	// the in-process store again at each outage until Redis has them.
	made []HeldLock
	// cleared are the locks ended in process while Redis was away (an
	// unlock, a password reset), which Redis, if it kept its data, still
	// holds: they are ended there before the locks in force are held.
	cleared []clearedLock
	// madeBy and clearedBy count made and cleared by group, each at most
	// maxMade.
	madeBy, clearedBy map[string]int
	// lastMade and lastCleared are where each identity's latest entry in
	// made and in cleared is, so that an identity unlocked again, with no
	// lock of its own made since, keeps one entry (noteCleared).
	lastMade, lastCleared map[ruleID]int
	// madeAt is where each identity's entries in made that no unlock has
	// ended since (Until set) are, in order: an unlock ends those alone,
	// without reading every other identity's.
	madeAt map[ruleID][]int
	// handed is how many of cleared a failback is giving Redis: those are
	// not moved to a later time, which Redis would not learn of.
	handed int
	// logged are the rules whose locks the lockout log records (SetLogged).
	logged map[string]bool
	// unlocked are the recent unlocks of those rules (Clear) that did
	// not fail, by identity, when each was made, each kept for
	// logWriteGrace, at most maxMade of each group (unlockedBy). Clear's
	// caller ends the lock's record in the log only once Clear has
	// returned: a load of the lockouts in force (restore) that read the
	// log before then holds no lock the log lists that began no later
	// than an unlock here. Each is in unlockOrder, oldest first (the
	// times are taken under madeMu), so that those past logWriteGrace
	// are forgotten from its front, not found among all.
	unlocked    map[ruleID]*list.Element // of *unlockNote
	unlockOrder list.List
	unlockedBy  map[string]int
	// handing is set, under madeMu, while a failback hands the limits
	// back to Redis: every Clear then notes its unlock in cleared, to be
	// ended in Redis again after the failback's last Hold.
	handing bool
	// scanning, set by tests before a failback, is called between the
	// failback's scans, which must not hold up a failure decided then.
	scanning func()
	// looked counts the entries of made and unlocked read under madeMu,
	// which every failure decided in process waits for, by Clear and
	// forgetUnlocks: tests check that an unlock and the failback read
	// their own identity's, not every one's.
	looked int
}

// maxMade bounds, for each rule, the locks made in process that a
// Failover keeps for Redis, and the locks ended in process it keeps to
// end there: each lock cost an attacker a threshold of failures, and some
// rules' (an application's accounts, named at will by whoever holds its
// key) cost little; past the bound, the lockout log still has those it
// records. A bound per rule keeps one rule's flood from taking another's
// places.
const maxMade = 20_000

// lockForgetter is an in-process store that can forget the locks it held
// of the rules logged reports, or of every rule if logged is nil
// (Local.ForgetLocks).
type lockForgetter interface {
	ForgetLocks(logged func(name string) bool)
}

// DefaultTimeout bounds each Redis call a Failover makes, from the wait for
// a free connection to the reply: a decision that Redis has not answered
// by then is taken by the failure policy instead. A Redis that refuses
// connections or stops answering on an open one shows sooner, as the
// client's own connect (2 s) and reply (1 s) errors. go-redis reports a
// wait for a free connection and a connection still being set up against
// a stuck Redis alike, so this bound must also outlast the queue a burst
// makes for connections: a replica under load must not take itself for
// one without Redis.
const DefaultTimeout = 5 * time.Second

// restoreTimeout bounds the loading of the lockouts in force when Redis is
// lost; local decisions wait for it at most that long.
const restoreTimeout = 2 * time.Second

// Pinger asks Redis whether it is there: a go-redis client.
type Pinger interface {
	Ping(ctx context.Context) *redis.StatusCmd
}

// ping asks p whether Redis is there. A Redis Cluster is there when every
// master answers: go-redis sends a PING to one node of a cluster, and a
// probe that one master satisfied would hand the limits back while
// another's slots stay out of reach, for the next decision that needs
// one of them to leave again, four times a second (the identities of the
// masters that answer counted in turn in Redis and in process, and under
// FailOpen not at all whenever a request names a slot out of reach).
//
// go-redis reads the map of the slots again before it pings the masters,
// asking one node after another; a node that takes connections and
// answers nothing (a hung replica) would hold that read for all of ctx,
// and fail the pings of masters that answer. The read gets half of the
// time left: past it, the map last read serves.
func ping(ctx context.Context, p Pinger) error {
	c, ok := p.(*redis.ClusterClient)
	if !ok {
		return p.Ping(ctx).Err()
	}
	return forEachMaster(ctx, c, func(master *redis.Client) error {
		return master.Ping(ctx).Err()
	})
}

// forEachMaster calls fn for each master of c, concurrently, after
// go-redis has read the map of the slots again in half of the time ctx
// leaves (ping says why).
func forEachMaster(ctx context.Context, c *redis.ClusterClient, fn func(master *redis.Client) error) error {
	mapCtx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		mapCtx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(deadline)/2))
		defer cancel()
	}
	return c.ForEachMaster(mapCtx, func(_ context.Context, master *redis.Client) error {
		return fn(master)
	})
}

// NewFailover puts policy in front of shared, whose Redis rdb answers the
// probes' pings; local serves under FailLocal. Each call to shared is
// bounded by DefaultTimeout, which takes a client that honours its
// contexts' deadlines (redis.Options.ContextTimeoutEnabled).
func NewFailover(shared, local Store, rdb Pinger, policy FailurePolicy, log *slog.Logger) *Failover {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Failover{shared: shared, local: local, rdb: rdb, pinger: rdb, policy: policy, log: log,
		timeout: DefaultTimeout, stop: make(chan struct{})}
}

// SetProbeClient makes the probes ping Redis through c, a client of the
// same Redis with a pool of its own; call it before f is used. Without it
// they share rdb's pool, and a flood that keeps every connection busy
// makes their pings wait too, so a queue can pass for an outage.
func (f *Failover) SetProbeClient(c Pinger) {
	if c != nil {
		f.pinger = c
	}
}

// SetLogged names the rules whose every lock the lockout log that Restore
// reads records, and whose unlocks end there; call it before f is used.
// At the failback a lock of theirs made in process is given to Redis only
// while the log lists it (or it is too recent for the log to have it): an
// unlock through another replica, on Redis, may have ended it meanwhile.
func (f *Failover) SetLogged(names ...string) {
	f.logged = map[string]bool{}
	for _, n := range names {
		f.logged[n] = true
	}
}

// logWriteGrace is how long after it was made a lock of a logged rule is
// given to Redis at the failback though the lockout log does not list it:
// the service writes it there once it is made, and may not have yet.
const logWriteGrace = 30 * time.Second

// SetTimeout changes the bound on each Redis call (DefaultTimeout); call it
// before f is used.
func (f *Failover) SetTimeout(d time.Duration) {
	if d > 0 {
		f.timeout = d
	}
}

// Watch sets Restore and OnRedisError, for a caller that holds f behind an
// interface of its own (auth.Limits); call it before f is used.
func (f *Failover) Watch(restore func(context.Context) ([]HeldLock, error), onRedisError func(error)) {
	f.Restore, f.OnRedisError = restore, onRedisError
}

// Degraded reports whether Redis is currently treated as down.
func (f *Failover) Degraded() bool { return f.degraded.Load() }

// Policy returns the failure policy.
func (f *Failover) Policy() FailurePolicy { return f.policy }

// Close stops the probe, if one runs.
func (f *Failover) Close() { f.stopOnce.Do(func() { close(f.stop) }) }

// AllowAll decides a request, by Redis when it answers, by the policy
// otherwise.
func (f *Failover) AllowAll(ctx context.Context, rules ...Rule) (Decision, error) {
	if err := validRules(rules); err != nil {
		return Decision{}, err
	}
	// What the shared store would answer from its memory, asked first:
	// that asks no Redis, so needs no bound on a call (a timer), which a
	// flood of rejections would otherwise pay for each.
	if d, ok := f.remembered(rules); ok {
		return d, nil
	}
	if d, stands, err := fromRedis(ctx, f, func(ctx context.Context) (Decision, error) {
		return f.shared.AllowAll(ctx, rules...)
	}); stands {
		return d, err
	}
	switch f.policy {
	case FailClosed:
		return Decision{}, ErrRedisUnavailable
	case FailOpen:
		f.logOpen()
		d := Decision{Allowed: true, Results: make([]Result, len(rules))}
		for i, r := range rules {
			d.Results[i] = Result{Name: r.Name, Limit: r.Limit, Allowed: true, Remaining: r.Limit.Count}
			if r.Place != nil {
				// Failures are counted nowhere: nothing to hold a place
				// in (as BeginAttempt).
				d.Results[i].Token = newAttemptToken()
			}
		}
		return d, nil
	default:
		if err := f.waitRestored(ctx); err != nil {
			return Decision{}, err
		}
		if f.locksMissing.Load() && slices.ContainsFunc(rules, func(r Rule) bool { return r.Lockable }) {
			return Decision{}, ErrRedisUnavailable
		}
		if !hasPlaces(rules) {
			return f.local.AllowAll(ctx, rules...)
		}
		// Places are taken in process as BeginAttempt takes them.
		f.localMu.RLock()
		if !f.degraded.Load() {
			// Redis took over again meanwhile: it decides.
			f.localMu.RUnlock()
			return f.AllowAll(ctx, rules...)
		}
		defer f.localMu.RUnlock()
		return f.local.AllowAll(ctx, rules...)
	}
}

// Remembered answers from the shared store's memory while Redis is
// treated as up, when AllowAll would consult it. While degraded under the
// local policy it answers the rejections the in-process limits would
// decide, once the lockouts in force are loaded: Redis' memory is off
// then, and a caller that asks before costly work (a device cookie's
// lookup) must not do that work for every request the outage refuses.
// Otherwise false.
func (f *Failover) Remembered(rules ...Rule) (Decision, bool) {
	if !f.degraded.Load() {
		return f.shared.Remembered(rules...)
	}
	l, ok := f.local.(*Local)
	if f.policy == FailClosed || f.policy == FailOpen || !ok || validRules(rules) != nil || !f.restoredNow() ||
		(f.locksMissing.Load() && slices.ContainsFunc(rules, func(r Rule) bool { return r.Lockable })) {
		return Decision{}, false
	}
	d, rejected := l.rejects(rules)
	if !rejected {
		return Decision{}, false
	}
	d.FromMemory = true
	return d, true
}

// restoredNow reports, without waiting, whether the lockouts in force at
// the start of the current outage are loaded (waitRestored).
func (f *Failover) restoredNow() bool {
	p := f.restored.Load()
	if p == nil {
		return true
	}
	select {
	case <-*p:
		return true
	default:
		return false
	}
}

// remembered is Remembered for rules already validated: a Redis store's
// memory is asked without checking them again, a second time for every
// rejection of a flood.
func (f *Failover) remembered(rules []Rule) (Decision, bool) {
	if f.degraded.Load() {
		return Decision{}, false
	}
	if rs, ok := f.shared.(*RedisStore); ok {
		return rs.limiter.remembered(rules, nil)
	}
	return f.shared.Remembered(rules...)
}

// ErrRedisSlow is returned for a call Redis did not answer within the
// Failover's bound (IsSlow) while a probe checks whether Redis is there.
var ErrRedisSlow = errors.New("ratelimit: redis did not answer in time")

// confirmPings is how many pings in a row, each allowed a second, must
// fail after a slow answer before Redis is taken for gone.
const confirmPings = 3

// suspect notes a slow answer and, unless one runs, starts a probe that
// enters degraded mode only if Redis then fails confirmPings pings in a
// row. It returns the error the slow call's caller gets.
func (f *Failover) suspect(cause error) error {
	if f.OnRedisError != nil {
		f.OnRedisError(cause)
	}
	f.probeMu.Lock()
	defer f.probeMu.Unlock()
	if !f.degraded.Load() && !f.confirming {
		f.confirming = true
		go f.confirm(cause, f.outages.Load())
	}
	return fmt.Errorf("%w: %w", ErrRedisSlow, cause)
}

// confirm pings Redis after a slow answer and trips if none answers,
// unless an outage began since the slow answer (outages is the count
// then): its probe has Redis in hand, and may have given the limits back
// to it while these pings, each waiting up to a second, went unanswered;
// tripping then would begin another outage for one that is over.
func (f *Failover) confirm(cause error, outages uint64) {
	defer func() {
		f.probeMu.Lock()
		f.confirming = false
		f.probeMu.Unlock()
	}()
	for i := range confirmPings {
		if i > 0 {
			select {
			case <-f.stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := ping(ctx, f.pinger)
		cancel()
		if err == nil {
			return
		}
		cause = err
		if f.outages.Load() != outages {
			return
		}
	}
	f.log.Warn("redis answered nothing to several pings after a slow answer", "err", cause)
	f.tripFrom(cause, outages)
}

// trip enters degraded mode and starts the probe.
func (f *Failover) trip(cause error) { f.tripUnless(cause, false, 0) }

// tripFrom is trip for the failure of a call sent when outages outages had
// begun. If another has begun since, its probe has Redis in hand and may
// have handed the limits back to it after the call was sent (a failback
// takes a decision first): the failure, news from before, begins none.
// A Redis lost again is found by the next call.
func (f *Failover) tripFrom(cause error, outages uint64) { f.tripUnless(cause, true, outages) }

// tripUnless is trip, unless since is set and an outage has begun since
// the count outages.
func (f *Failover) tripUnless(cause error, since bool, outages uint64) {
	if f.OnRedisError != nil {
		f.OnRedisError(cause)
	}
	f.probeMu.Lock()
	defer f.probeMu.Unlock()
	if since && f.outages.Load() != outages {
		return
	}
	if !f.degraded.Load() {
		// The restore is published before degraded is set, so whoever
		// sees the outage finds its restore and waits for it.
		done := make(chan struct{})
		f.restored.Store(&done)
		go f.restore(done)
		f.degraded.Store(true)
		f.outages.Add(1)
		f.log.Error("redis unreachable; limits follow the failure policy until it answers",
			"policy", string(f.policy), "err", cause)
		if f.OnChange != nil {
			f.OnChange(true)
		}
	}
	if !f.probing {
		f.probing = true
		go f.probe()
	}
}

// probe pings Redis until it answers, then leaves degraded mode.
// A failback that Redis did not take (it answers PING but refuses the
// writes, as a replica or a master short of replicas does) is tried again
// after a wait that doubles up to maxFailbackWait: each one reads the
// lockouts in force from the log, and logs why it failed. So is one after
// which Redis was lost again within maxFailbackWait (a Redis in a crash
// loop, a link that drops its connections): each such round reads the
// log twice (the outage's load and the failback's) and puts every lock
// in force into Redis, which four times a second would be a storm on
// Postgres and on the Redis that struggles to stay up.
func (f *Failover) probe() {
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	var next time.Time
	wait := probeInterval
	f.probeMu.Lock()
	if !f.lastBack.IsZero() && time.Since(f.lastBack) < maxFailbackWait {
		wait = min(2*f.backWait, maxFailbackWait)
		next = f.lastBack.Add(wait)
	}
	f.probeMu.Unlock()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		if time.Now().Before(next) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := ping(ctx, f.pinger)
		cancel()
		if err != nil {
			continue
		}
		if !f.failback() {
			next = time.Now().Add(wait)
			wait = min(2*wait, maxFailbackWait)
			continue
		}
		// One failback at a time: an outage that began during this one
		// left the probe to it.
		f.probeMu.Lock()
		f.lastBack, f.backWait = time.Now(), wait
		if f.degraded.Load() {
			// Lost again as it was handed back: Redis flaps.
			wait = min(2*wait, maxFailbackWait)
			next, f.backWait = f.lastBack.Add(wait), wait
			f.probeMu.Unlock()
			continue
		}
		f.probing = false
		f.probeMu.Unlock()
		return
	}
}

// failbackProbe is the decision a failback asks of Redis first: a rule of
// its own, which no request shares, with a limit none reaches.
var failbackProbe = Rule{Name: "failback_probe", ID: "probe", Limit: Limit{Count: 100_000, Window: time.Second}}

// failbackProbes are the rules of the decision a failback asks of Redis
// first, pinged through p: failbackProbe on one Redis; on a cluster, one
// of failbackProbe's for each master, each in a slot that master holds
// (by p's map of the slots), so that every master takes a write.
func failbackProbes(ctx context.Context, p Pinger) ([]Rule, error) {
	c, ok := p.(*redis.ClusterClient)
	if !ok {
		return []Rule{failbackProbe}, nil
	}
	var mu sync.Mutex
	left := map[string]bool{}
	if err := forEachMaster(ctx, c, func(master *redis.Client) error {
		mu.Lock()
		left[master.Options().Addr] = true
		mu.Unlock()
		return nil
	}); err != nil {
		return nil, err
	}
	keys := Keys{kind: failbackProbe.Name}
	var probes []Rule
	// n masters take about n ln n identities to cover; the bound is for a
	// master with a slot or two, which is then left out.
	for i := 0; len(left) > 0 && i < 1<<16; i++ {
		r := failbackProbe
		if i > 0 {
			r.ID = fmt.Sprint(failbackProbe.ID, i)
		}
		master, err := c.MasterForKey(ctx, keys.Log(r.ID))
		if err != nil {
			return nil, err
		}
		if addr := master.Options().Addr; left[addr] {
			delete(left, addr)
			probes = append(probes, r)
		}
	}
	return probes, nil
}

// probeInterval is how often the probe pings Redis while it is away.
const probeInterval = 250 * time.Millisecond

// maxFailbackWait is the longest the probe waits to try a failback again
// after one that Redis did not take, or after one that Redis was lost
// again soon after (probe).
const maxFailbackWait = 4 * time.Second

// Check pings Redis once and, if Redis cannot be reached, enters degraded
// mode at once (at start, say, so that the first requests do not wait for
// a dead Redis). It returns the ping's error.
func (f *Failover) Check(ctx context.Context) error {
	// Read before degraded, which trip sets before counting the outage.
	outages := f.outages.Load()
	was := f.degraded.Load()
	cctx, cancel := context.WithTimeout(ctx, f.timeout)
	err := ping(cctx, f.rdb)
	cancel()
	switch {
	case IsSlow(ctx, err):
		_ = f.suspect(err)
	case IsOutage(ctx, err) && was:
		// Sent during an outage, whose probe may have found Redis since
		// (tripFrom): nothing to begin.
		if f.OnRedisError != nil {
			f.OnRedisError(err)
		}
	case IsOutage(ctx, err):
		f.tripFrom(err, outages)
	}
	return err
}

// restore loads the lockouts in force into the in-process store (under
// FailLocal, when Restore is set), then closes done. If the load fails it
// closes done all the same, so that decisions do not wait for it, but
// marks the locks missing: local decisions then refuse lockable rules
// (ErrRedisUnavailable) rather than admit guesses at accounts Redis held
// locked, and the load is tried again every second until it succeeds or
// the outage ends.
func (f *Failover) restore(done chan struct{}) {
	closeDone := sync.OnceFunc(func() { close(done) })
	defer closeDone()
	if f.policy != FailLocal || f.Restore == nil {
		return
	}
	// What the in-process store held since the last outage may have
	// ended through another replica: the lockout log says what is in
	// force now. Failures decided in process wait for done; one that did
	// not, having waited for the last outage's, runs before or after this,
	// not during it (localMu), and its lock, if it made one, is in made.
	// Only the locks of the rules the log records are forgotten: it
	// brings those in force back, and nothing would bring the others
	// back (a device's, a second step's), which a Redis that comes and
	// goes would otherwise wipe at every outage.
	if lf, ok := f.local.(lockForgetter); ok {
		var logged func(string) bool
		if f.logged != nil {
			logged = func(name string) bool { return f.logged[name] }
		}
		f.localMu.Lock()
		lf.ForgetLocks(logged)
		f.localMu.Unlock()
	}
	// A restore whose outage has ended, and another begun, leaves the
	// in-process store and locksMissing to the newer one: its list is the
	// newer, and an unlock since may have left this one's stale. Checked
	// under localMu, which the newer one's ForgetLocks waits for.
	current := func() bool { p := f.restored.Load(); return p != nil && *p == done }
	for {
		ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
		locks, err := f.Restore(ctx)
		cancel()
		f.localMu.Lock()
		if !current() {
			f.localMu.Unlock()
			return
		}
		if err == nil {
			// The log may have been read before the caller of an unlock
			// (Clear, which notes it in unlocked) ended the lock's record
			// there: the unlock came last. The locks made in process that
			// Redis has not been given yet (a failback that failed) may be
			// in no lockout log. They are held under madeMu, under which
			// an unlock ends its lock in process: one that comes after
			// this ends what it holds.
			f.madeMu.Lock()
			f.forgetUnlocks(time.Now())
			locks = f.withoutUnlocked(locks, f.cleared, f.unlockNotes())
			locks = append(locks, f.made...)
			err = f.local.Hold(context.Background(), locks...)
			f.madeMu.Unlock()
			if errors.Is(err, ErrNoLockouts) {
				// The others are held; a lock no rule here keeps must not
				// leave every lockable decision refused for the outage.
				f.log.Warn("lockouts in force of rules without lockouts here skipped", "err", err)
				err = nil
			}
		}
		f.locksMissing.Store(err != nil)
		f.localMu.Unlock()
		if err == nil {
			if len(locks) > 0 {
				f.log.Info("lockouts in force loaded into the in-process limits", "count", len(locks))
			}
			return
		}
		f.log.Error("loading the lockouts in force for the in-process limits; lockable decisions are refused until it succeeds", "err", err)
		closeDone()
		select {
		case <-f.stop:
			return
		case <-time.After(time.Second):
		}
		f.localMu.Lock()
		if !current() {
			f.localMu.Unlock()
			return
		}
		back := !f.degraded.Load()
		if back {
			f.locksMissing.Store(false)
		}
		f.localMu.Unlock()
		if back {
			return
		}
	}
}

// failback hands the limits back to Redis, which answers again. First
// Redis learns what happened while it was away: the locks ended in
// process (an unlock, a password reset) are ended there, as it may have
// kept its data, then the lockouts in force are held there, as it may
// have come back empty: those Restore lists and those made or given in
// process, less those ended since. Then Redis decides, and is given the
// locks made in process meanwhile, by failures that were being decided
// when it took over; the unlocks made while all this ran are ended in
// Redis again, each before the locks made after it are given and after
// those made before it. No unlock waits for it.
//
// If Redis does not answer (it stopped again, or not in time) before it
// decides, failback reports false and changes nothing: the limits stay in
// process, and the probe tries again; after, the replica goes back to
// its in-process limits (trip), keeping what Redis did not take, as it
// does what a Redis refusing writes (READONLY, OOM, MISCONF: IsOutage)
// did not take. What Redis refused with another error reply (a key of
// the wrong type) is logged and not given again. A lockout log that cannot be
// read does not hold the failback: the locks made here are given all the
// same.
//
// First of all, Redis must take a decision, which writes: one that
// answers pings but refuses writes (READONLY, NOREPLICAS, OOM, MISCONF)
// would otherwise be given the limits back whenever there is nothing to
// hand it, and the replica leave it again at the next decision, four
// times a second. On a cluster the decision writes on every master
// (failbackProbes).
func (f *Failover) failback() bool {
	if err := f.sharedCall(1, func(ctx context.Context) error {
		probes, err := failbackProbes(ctx, f.pinger)
		if err != nil {
			return err
		}
		_, err = f.shared.AllowAll(ctx, probes...)
		return err
	}); err != nil {
		f.log.Error("redis answers but does not take a decision; the limits stay in process", "err", err)
		return false
	}
	f.madeMu.Lock()
	f.handing = true
	f.madeMu.Unlock()
	stop := func() {
		f.madeMu.Lock()
		f.handing, f.handed = false, 0
		f.madeMu.Unlock()
	}
	var locks []HeldLock
	read := false
	if f.Restore != nil {
		ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
		inForce, err := f.Restore(ctx)
		cancel()
		if err != nil {
			f.log.Error("reading the lockouts in force to put back into redis", "err", err)
		}
		locks, read = inForce, err == nil
	}
	// A lock made here of a rule the log records, which the log no longer
	// lists, was ended through another replica since: an unlock there came
	// last. One too recent for the log to have is given all the same, and
	// so is one whose start is not known (held without Since, longer than
	// its level's), and every one when the log could not be read. A list
	// as long as a Restore gives at most (DefaultLocalIdentities) may have
	// left some out.
	listed := make(map[ruleID]bool, len(locks))
	for _, h := range locks {
		listed[ruleID{h.Name, h.ID}] = true
	}
	complete := read && len(locks) < DefaultLocalIdentities
	unlisted := func(h HeldLock) bool {
		if !complete || !f.logged[h.Name] {
			return false
		}
		began := f.began(h)
		return !began.IsZero() && time.Since(began) >= logWriteGrace && !listed[ruleID{h.Name, h.ID}]
	}
	// The scans are made on copies, outside madeMu, which every failure
	// and unlock decided in process takes: a long lockout log must not
	// hold them up.
	f.madeMu.Lock()
	held, ended := len(f.made), len(f.cleared)
	cleared := slices.Clone(f.cleared)
	made := slices.Clone(f.made)
	f.handed = ended
	f.forgetUnlocks(time.Now())
	unlocked := f.unlockNotes()
	f.madeMu.Unlock()
	// A lock the lockout log lists may have been ended in process before
	// the log says so: an unlock made after it began came last. One that
	// began after the unlock (through another replica, on Redis) came
	// last itself. A lock made in process after an unlock came after it
	// (Clear ended those before it), and is held after the unlocks are
	// ended in Redis. So may one ended here in Redis, just before the
	// outage, whose caller had not yet ended its record in the log when
	// the log was read (unlocked), as restore knows.
	locks = f.withoutUnlocked(locks, cleared, unlocked)
	if f.scanning != nil {
		f.scanning()
	}
	for _, h := range made {
		if !unlisted(h) {
			locks = append(locks, h)
		}
	}
	before := f.lookAtServer()
	if !f.endInRedis(cleared) {
		stop()
		return false
	}
	if err := f.sharedCall(len(locks), func(ctx context.Context) error { return f.shared.Hold(ctx, locks...) }); !f.answered("putting the lockouts in force back into redis", err) {
		stop()
		return false
	}
	mark := &failbackMark{to: f.lookAtServer()}
	if mark.to.id != before.id {
		// A restart between the looks (or an endpoint over several
		// servers): which one holds the locks is not known.
		mark.to = server{}
	}

	f.probeMu.Lock()
	mark.at = time.Now()
	f.back.Store(mark)
	if f.degraded.CompareAndSwap(true, false) {
		f.log.Info("redis answers again; shared limits restored")
		if f.OnChange != nil {
			f.OnChange(false)
		}
	}
	f.probeMu.Unlock()

	// Every failure decided in process, and every lock given in process,
	// has noted its lock, or finds Redis in charge. The unlocks noted
	// until then came before every lock of late still in force (an
	// unlock ends its identity's locks in made), and may end one given
	// above: they are ended first, so that none is held again after its
	// unlock by a later lock of its identity (Redis keeps the longer of
	// two, with its start). Those noted after came after every lock of
	// late, and are ended after it.
	f.localMu.Lock()
	f.madeMu.Lock()
	late := slices.Clone(f.made[held:])
	first := slices.Clone(f.cleared[ended:])
	f.handed = len(f.cleared)
	f.madeMu.Unlock()
	f.localMu.Unlock()
	taken := f.endInRedis(first)
	if taken {
		err := f.sharedCall(len(late), func(ctx context.Context) error { return f.shared.Hold(ctx, late...) })
		taken = f.answered("putting the last locks made in process into redis", err)
	}

	f.madeMu.Lock()
	f.handing = false
	since := slices.Clone(f.cleared[ended:])
	f.handed = len(f.cleared)
	f.madeMu.Unlock()
	if taken {
		taken = f.endInRedis(since[len(first):])
	}

	// What Redis took is forgotten; the rest is kept for the next outage
	// and the next failback. Only appended to since: by unlocks and
	// failures of an outage begun meanwhile.
	f.madeMu.Lock()
	drop, dropCleared := held, ended
	if taken {
		drop, dropCleared = held+len(late), ended+len(since)
	}
	f.made = slices.Delete(f.made, 0, drop)
	f.cleared = slices.Delete(f.cleared, 0, dropCleared)
	f.handed = 0
	for i := range f.cleared {
		f.cleared[i].made = max(f.cleared[i].made-drop, 0)
	}
	f.madeBy, f.clearedBy, f.lastMade, f.lastCleared, f.madeAt = nil, nil, nil, nil, nil
	for i, h := range f.made {
		f.madeBy = addTo(f.madeBy, f.group(h.Name, h.ID), 1)
		f.index(h, i)
	}
	for i, c := range f.cleared {
		f.clearedBy = addTo(f.clearedBy, f.group(c.name, c.id), 1)
		f.lastCleared = setIn(f.lastCleared, c.ruleID, i)
	}
	f.madeMu.Unlock()
	if !taken {
		// Redis stopped answering once in charge: the limits go back in
		// process, and the probe gives it the rest.
		f.trip(errNotTaken)
	}
	return true
}

// failbackMark is what a failback leaves the watch of restarts to know.
type failbackMark struct {
	// at is when the lockouts in force were back in Redis.
	at time.Time
	// to is the server process that answered INFO the same just before
	// the failback's writes and just after them, which holds the locks;
	// zero when no look was made or the two looks differ.
	to server
}

// lookAtServer is what INFO says of the server process that answers, when
// the watch of restarts watches; zero if it does not, or INFO fails.
func (f *Failover) lookAtServer() server {
	in, ok := f.pinger.(infoer)
	if !ok || !f.watching.Load() {
		return server{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, err := serverOf(ctx, in)
	if err != nil {
		return server{}
	}
	return s
}

// errNotTaken is why a failback that Redis stopped answering once in
// charge goes back to the in-process limits.
var errNotTaken = errors.New("ratelimit: redis stopped answering while the limits were handed back to it")

// withoutUnlocked returns locks less those that began no later than an
// unlock of their identity in cleared or in unlocked, which came last;
// locks itself is left as it was.
func (f *Failover) withoutUnlocked(locks []HeldLock, cleared []clearedLock, unlocked []unlockNote) []HeldLock {
	if len(cleared) == 0 && len(unlocked) == 0 {
		return locks
	}
	lastUnlock := make(map[ruleID]time.Time, len(unlocked)+len(cleared))
	for _, u := range unlocked {
		lastUnlock[u.ruleID] = u.at
	}
	for _, c := range cleared {
		if c.at.After(lastUnlock[c.ruleID]) {
			lastUnlock[c.ruleID] = c.at
		}
	}
	return slices.DeleteFunc(slices.Clone(locks), func(h HeldLock) bool {
		at, ok := lastUnlock[ruleID{h.Name, h.ID}]
		return ok && !f.began(h).After(at)
	})
}

// endInRedis gives Redis the unlocks of cleared, each ending only what
// came before it (RedisStore.ClearBefore), in pipelines under one bound;
// false if Redis did not answer.
func (f *Failover) endInRedis(cleared []clearedLock) bool {
	if cb, ok := f.shared.(clearerBefore); ok {
		unlocks := make([]PastUnlock, len(cleared))
		for i, c := range cleared {
			unlocks[i] = PastUnlock{Name: c.name, ID: c.id, At: c.at}
		}
		err := f.sharedCall(len(unlocks), func(ctx context.Context) error { return cb.ClearBefore(ctx, unlocks...) })
		return f.answered("ending in redis the locks ended during the outage", err)
	}
	// A shared store that knows no times: each unlock ends what it finds.
	for _, c := range cleared {
		err := f.sharedCall(1, func(ctx context.Context) error {
			_, err := f.shared.Clear(ctx, c.name, c.id)
			return err
		})
		if !f.answered("ending in redis a lock ended during the outage", err) {
			return false
		}
	}
	return true
}

// clearerBefore is a shared store that takes unlocks made elsewhere, each
// ending only what came before it (RedisStore).
type clearerBefore interface {
	ClearBefore(ctx context.Context, unlocks ...PastUnlock) error
}

// began is when h began: its Since, or, without one, by its rule's
// lockout policy in the in-process store, its end less its level's length.
// A lock longer than its level's (an administrator's, held at level 1)
// has no such start, and is taken to have begun long ago, before any
// unlock, as is one of a rule without a policy here: as clear.lua takes
// them.
func (f *Failover) began(h HeldLock) time.Time {
	if !h.Since.IsZero() {
		if h.Since.After(time.Now()) {
			// Given by a clock running ahead: no start here. Redis, which
			// held it as begun when it was held (hold.lua), orders it with
			// the unlocks (ClearBefore); taken as now here, it would come
			// after every unlock of the outage and be held again.
			return time.Time{}
		}
		return h.Since
	}
	if l, ok := f.local.(*Local); ok {
		if p, ok := l.policies[h.Name]; ok {
			if began := h.Until.Add(-p.LockFor(h.Level)); !began.After(time.Now()) {
				return began
			}
		}
	}
	return time.Time{}
}

// group is what the bound on made and cleared counts an identity under:
// its group in the in-process store (Local.group), so that an
// application's accounts, named at will, fill their own places and not
// those of XCloak's own accounts.
func (f *Failover) group(name, id string) string {
	if l, ok := f.local.(*Local); ok {
		return l.group(name, id)
	}
	return name
}

// answered reports whether Redis answered a call of the failback that
// returned err: nil, or an error reply, which is logged (a lock of a rule
// without lockouts here, less loudly). A Redis that did not answer keeps
// the limits in process.
func (f *Failover) answered(what string, err error) bool {
	switch bg := context.Background(); {
	case err == nil:
		return true
	case errors.Is(err, ErrNoLockouts):
		f.log.Warn(what+": lockouts of rules without lockouts here skipped", "err", err)
		return true
	case IsSlow(bg, err) || IsOutage(bg, err):
		f.log.Error(what+"; the limits stay in process until redis takes them", "err", err)
		return false
	}
	f.log.Error(what+"; redis refused it", "err", err)
	return true
}

// sharedCall makes call against the shared store within a bound that
// grows with the n locks it concerns; nothing to do for none.
func (f *Failover) sharedCall(n int, call func(context.Context) error) error {
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout+time.Duration(n)*holdTimePerLock)
	defer cancel()
	return call(ctx)
}

// holdTimePerLock is what holdShared allows each lock beyond
// restoreTimeout: about ten times what Redis on loopback takes.
const holdTimePerLock = 100 * time.Microsecond

// waitRestored waits until the lockouts in force at the start of the
// current outage are loaded, so that no local decision admits a guess at
// an account Redis held locked.
func (f *Failover) waitRestored(ctx context.Context) error {
	p := f.restored.Load()
	if p == nil {
		return nil
	}
	select {
	case <-*p:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// logOpen logs at most once a second that requests pass unlimited.
func (f *Failover) logOpen() {
	now := time.Now().Unix()
	if last := f.openLog.Load(); last != now && f.openLog.CompareAndSwap(last, now) {
		f.log.Error("redis unreachable and failure policy is open: admitting requests WITHOUT limits")
	}
}

// Fail records a failed attempt for id under the lockouts of rule name,
// by Redis when it answers.
func (f *Failover) Fail(ctx context.Context, name, id, attempt string) (Failure, error) {
	if res, stands, err := fromRedis(ctx, f, func(ctx context.Context) (Failure, error) {
		return f.shared.Fail(ctx, name, id, attempt)
	}); stands {
		return res, err
	}
	switch f.policy {
	case FailClosed:
		return Failure{}, ErrRedisUnavailable
	case FailOpen:
		// Counted nowhere and locking nothing, it reads as the first
		// failure of a run: Failures 0 would say the identity was
		// locked already, and refuse what the policy lets through.
		return Failure{Failures: 1}, nil
	default:
		if err := f.waitRestored(ctx); err != nil {
			return Failure{}, err
		}
		f.localMu.RLock()
		if !f.degraded.Load() {
			// Redis took over again meanwhile: it decides.
			f.localMu.RUnlock()
			return f.Fail(ctx, name, id, attempt)
		}
		// The failure and the note of its lock are one step to Clear
		// (madeMu), which would otherwise end the lock between them and
		// find no note of it, or mark a lock made between its own two.
		f.madeMu.Lock()
		res, err := f.local.Fail(ctx, name, id, attempt)
		if err == nil && res.LockedNow {
			now := time.Now()
			f.noteMade(HeldLock{Name: name, ID: id, Since: now, Until: now.Add(res.LockedFor), Level: res.Level})
		}
		f.madeMu.Unlock()
		f.localMu.RUnlock()
		return res, err
	}
}

// BeginAttempt begins an attempt against id's lockout under rule name
// where failures are counted now: in Redis, or, while it is away, where
// the policy says (Fail). Attempts begun in one store and counted in the
// other when Redis goes or comes back are not carried over: each stops
// counting by its ttl.
func (f *Failover) BeginAttempt(ctx context.Context, name, id, attempt string, ttl time.Duration) (Begun, error) {
	if res, stands, err := fromRedis(ctx, f, func(ctx context.Context) (Begun, error) {
		return f.shared.BeginAttempt(ctx, name, id, attempt, ttl)
	}); stands {
		return res, err
	}
	switch f.policy {
	case FailClosed:
		return Begun{}, ErrRedisUnavailable
	case FailOpen:
		// Failures are counted nowhere: nothing to hold a place in.
		if err := checkTTL(ttl); err != nil {
			return Begun{}, err
		}
		return Begun{Allowed: true, Token: newAttemptToken()}, nil
	default:
		if err := f.waitRestored(ctx); err != nil {
			return Begun{}, err
		}
		f.localMu.RLock()
		if !f.degraded.Load() {
			// Redis took over again meanwhile: it decides.
			f.localMu.RUnlock()
			return f.BeginAttempt(ctx, name, id, attempt, ttl)
		}
		defer f.localMu.RUnlock()
		return f.local.BeginAttempt(ctx, name, id, attempt, ttl)
	}
}

// EndAttempt ends the attempt token against id's lockout under rule name
// in both stores, wherever it began: in process, and in Redis unless it is
// away.
func (f *Failover) EndAttempt(ctx context.Context, name, id, token string) error {
	if err := f.local.EndAttempt(ctx, name, id, token); err != nil {
		return err
	}
	_, stands, err := fromRedis(ctx, f, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, f.shared.EndAttempt(ctx, name, id, token)
	})
	if stands {
		return err
	}
	return nil
}

// Clear ends id's lock under the lockouts of rule name wherever it may be
// held, in Redis and in process, and forgets its failures. While Redis is
// away it is ended in process, and in Redis at the failback, where it
// ends only a lock that began before it, before the locks made in
// process, this one no longer among them, are put there.
func (f *Failover) Clear(ctx context.Context, name, id string) (bool, error) {
	// The unlock in process and its marks in made are one step to a
	// failure deciding in process (see Fail); its time is taken in it,
	// after any failure that came first.
	f.madeMu.Lock()
	at := time.Now()
	wasLocal, err := f.local.Clear(ctx, name, id)
	if err != nil {
		f.madeMu.Unlock()
		return false, err
	}
	for _, i := range f.madeAt[ruleID{name, id}] {
		f.looked++
		// Ended, so that no store holds it again, in its place, which
		// the failback counts by.
		f.made[i].Until = time.Time{}
	}
	delete(f.madeAt, ruleID{name, id})
	if f.logged[name] {
		f.noteUnlocked(ruleID{name, id}, at)
	}
	noted := f.handing
	if noted {
		// A failback may give Redis this lock after Redis ended it:
		// it ends it again last.
		f.noteCleared(name, id, at)
	}
	f.madeMu.Unlock()
	was, stands, err := fromRedis(ctx, f, func(ctx context.Context) (bool, error) {
		return f.shared.Clear(ctx, name, id)
	})
	switch {
	case stands && err != nil:
		// Not ended in Redis: the log keeps listing the lock, which
		// holds again from it.
		f.madeMu.Lock()
		if e, ok := f.unlocked[ruleID{name, id}]; ok && e.Value.(*unlockNote).at.Equal(at) {
			f.dropUnlock(ruleID{name, id})
		}
		f.madeMu.Unlock()
		return false, err
	case stands:
		return was || wasLocal, nil
	case f.policy == FailClosed:
		return false, ErrRedisUnavailable
	default:
		f.madeMu.Lock()
		// A failback that ended meanwhile, past the unlocks it ends
		// again, may have given Redis this lock: Redis ends it now.
		back := !noted && !f.handing && !f.degraded.Load()
		if !noted && !back {
			f.noteCleared(name, id, at)
		}
		f.madeMu.Unlock()
		if back {
			return f.Clear(ctx, name, id)
		}
		return wasLocal, nil
	}
}

// clearedLock is an unlock noted in cleared: when it was made, and how
// many locks made then held: those after it came after the unlock.
type clearedLock struct {
	ruleID
	made int
	at   time.Time
}

// noteCleared notes an unlock made at at in cleared, within its group's
// bound; madeMu is held. An identity unlocked again with no lock of its
// own made since keeps its one entry, at the later time: a busy
// device's sign-ins, each of which clears its failures, take one place,
// not every other identity's of its group.
func (f *Failover) noteCleared(name, id string, at time.Time) {
	rid := ruleID{name, id}
	if i, ok := f.lastCleared[rid]; ok && i >= f.handed {
		if j, made := f.lastMade[rid]; !made || j < f.cleared[i].made {
			// Unlocks whose calls to Redis failed are noted as those
			// calls come back, not always in the order they were made.
			if at.After(f.cleared[i].at) {
				f.cleared[i].at = at
			}
			return
		}
	}
	if g := f.group(name, id); f.clearedBy[g] < maxMade {
		f.cleared = append(f.cleared, clearedLock{rid, len(f.made), at})
		f.clearedBy = addTo(f.clearedBy, g, 1)
		f.lastCleared = setIn(f.lastCleared, rid, len(f.cleared)-1)
	}
}

// noteUnlocked notes in unlocked an unlock of a logged rule made at at;
// madeMu is held.
func (f *Failover) noteUnlocked(rid ruleID, at time.Time) {
	if e, ok := f.unlocked[rid]; ok {
		// The latest unlock of all: last in the order.
		e.Value.(*unlockNote).at = at
		f.unlockOrder.MoveToBack(e)
		return
	}
	g := f.group(rid.name, rid.id)
	if f.unlockedBy[g] >= maxMade {
		f.forgetUnlocks(at)
		if f.unlockedBy[g] >= maxMade {
			return
		}
	}
	f.unlockedBy = addTo(f.unlockedBy, g, 1)
	if f.unlocked == nil {
		f.unlocked = map[ruleID]*list.Element{}
	}
	f.unlocked[rid] = f.unlockOrder.PushBack(&unlockNote{rid, at})
}

// unlockNote is an unlock noted in unlocked: when it was made.
type unlockNote struct {
	ruleID
	at time.Time
}

// forgetUnlocks forgets the unlocks in unlocked made longer than
// logWriteGrace before now, which the lockout log has: the oldest, up to
// the first that is not; madeMu is held.
func (f *Failover) forgetUnlocks(now time.Time) {
	for e := f.unlockOrder.Front(); e != nil; e = f.unlockOrder.Front() {
		f.looked++
		u := e.Value.(*unlockNote)
		if now.Sub(u.at) <= logWriteGrace {
			return
		}
		f.dropUnlock(u.ruleID)
	}
}

// unlockNotes returns the unlocks in unlocked, oldest first; madeMu is
// held.
func (f *Failover) unlockNotes() []unlockNote {
	notes := make([]unlockNote, 0, f.unlockOrder.Len())
	for e := f.unlockOrder.Front(); e != nil; e = e.Next() {
		notes = append(notes, *e.Value.(*unlockNote))
	}
	return notes
}

// dropUnlock forgets rid's unlock in unlocked, which holds one; madeMu is
// held.
func (f *Failover) dropUnlock(rid ruleID) {
	f.unlockOrder.Remove(f.unlocked[rid])
	delete(f.unlocked, rid)
	f.unlockedBy = addTo(f.unlockedBy, f.group(rid.name, rid.id), -1)
}

// noteMade notes a lock made or given in process in made, within its
// group's bound; madeMu is held.
func (f *Failover) noteMade(h HeldLock) {
	if g := f.group(h.Name, h.ID); f.madeBy[g] < maxMade {
		f.made = append(f.made, h)
		f.madeBy = addTo(f.madeBy, g, 1)
		f.index(h, len(f.made)-1)
	}
}

// index notes in lastMade and madeAt that h is made[i]; madeMu is held.
func (f *Failover) index(h HeldLock, i int) {
	rid := ruleID{h.Name, h.ID}
	f.lastMade = setIn(f.lastMade, rid, i)
	if !h.Until.IsZero() {
		if f.madeAt == nil {
			f.madeAt = map[ruleID][]int{}
		}
		f.madeAt[rid] = append(f.madeAt[rid], i)
	}
}

// setIn sets m[k] to v, making m if nil.
func setIn(m map[ruleID]int, k ruleID, v int) map[ruleID]int {
	if m == nil {
		m = map[ruleID]int{}
	}
	m[k] = v
	return m
}

// Hold puts locks recorded elsewhere into both stores: the in-process one
// serves them during an outage, the shared one, by Redis when it answers,
// the rest of the time. Held while Redis is away (an administrator's lock
// during an outage), they are given to Redis at the failback, as the
// locks made in process are.
func (f *Failover) Hold(ctx context.Context, locks ...HeldLock) error {
	// Locks of a rule without lockouts are skipped by both stores alike,
	// which report them (ErrNoLockouts) after holding the others.
	localErr := f.local.Hold(ctx, locks...)
	if localErr != nil && !errors.Is(localErr, ErrNoLockouts) {
		return localErr
	}
	_, stands, err := fromRedis(ctx, f, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, f.shared.Hold(ctx, locks...)
	})
	if !stands && f.policy == FailClosed {
		return ErrRedisUnavailable
	}
	if !stands {
		// Noted for the failback, as a failure's lock is (Fail), unless
		// Redis took over meanwhile: then given to it.
		f.localMu.RLock()
		if !f.degraded.Load() {
			f.localMu.RUnlock()
			return f.Hold(ctx, locks...)
		}
		f.madeMu.Lock()
		for _, h := range locks {
			f.noteMade(h)
		}
		f.madeMu.Unlock()
		// The load of the lockouts in force for this outage (restore)
		// may have run while Redis was asked, forgetting what was held
		// in process before it, these among them: they are held again.
		// A load that runs after this finds them in made.
		_ = f.local.Hold(ctx, locks...)
		f.localMu.RUnlock()
	}
	if err != nil {
		return err
	}
	return localErr
}

// Reset forgets the requests recorded for id under the rule name in both
// stores.
func (f *Failover) Reset(ctx context.Context, name, id string) error {
	if err := f.local.Reset(ctx, name, id); err != nil {
		return err
	}
	_, stands, err := fromRedis(ctx, f, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, f.shared.Reset(ctx, name, id)
	})
	if !stands && f.policy == FailClosed {
		return ErrRedisUnavailable
	}
	return err
}

// fromRedis makes call against Redis within f's bound, unless Redis is
// taken for gone already. stands reports whether its answer (or error)
// stands; if not, Redis could not be reached and the caller follows the
// failure policy. A slow answer stands as ErrRedisSlow while a probe
// checks Redis (IsSlow); an outage trips degraded mode (IsOutage).
func fromRedis[T any](ctx context.Context, f *Failover, call func(context.Context) (T, error)) (res T, stands bool, err error) {
	// Read before degraded, which trip sets before counting the outage:
	// an outage begun after this read that the call's failure would
	// begin again is not (tripFrom).
	outages := f.outages.Load()
	if f.degraded.Load() {
		return res, false, nil
	}
	cctx, cancel := context.WithTimeout(ctx, f.timeout)
	res, err = call(cctx)
	cancel()
	switch {
	case IsSlow(ctx, err):
		var zero T
		return zero, true, f.suspect(err)
	case !IsOutage(ctx, err):
		return res, true, err
	}
	f.tripFrom(err, outages)
	var zero T
	return zero, false, nil
}

// addTo adds n to m[name], making m if nil, and drops name at zero.
func addTo(m map[string]int, name string, n int) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	if m[name] += n; m[name] <= 0 {
		delete(m, name)
	}
	return m
}
