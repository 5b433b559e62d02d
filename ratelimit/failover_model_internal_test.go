package ratelimit

// Random runs of a Failover through outages and failbacks. What it keeps
// for Redis (made, cleared, unlocked) must agree with the indexes kept
// beside it (madeAt, lastMade, lastCleared, madeBy, clearedBy,
// unlockOrder, unlockedBy) and stay within its bounds, and, in the runs
// of one step at a time, match a reference that keeps the same the plain
// way; there, Redis must hold after every step what
// docs/SECURITY-MODEL.md promises ("Under XCLOAK_REDIS_FAILURE=local"):
// at a failback, each unlock made in process ends there a lock that
// began before it, before the locks made in process are put there, each
// lock keeping when it began.

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
)

// errCutOff is what a replica cut off from Redis gets: a refused dial,
// which IsOutage counts.
var errCutOff = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

// cutStore is the shared store as one replica reaches it: while down is
// set, every call fails as a refused dial does.
type cutStore struct {
	*RedisStore
	down *atomic.Bool
}

func (s cutStore) AllowAll(ctx context.Context, rules ...Rule) (Decision, error) {
	if s.down.Load() {
		return Decision{}, errCutOff
	}
	return s.RedisStore.AllowAll(ctx, rules...)
}

func (s cutStore) Fail(ctx context.Context, name, id, attempt string) (Failure, error) {
	if s.down.Load() {
		return Failure{}, errCutOff
	}
	return s.RedisStore.Fail(ctx, name, id, attempt)
}

func (s cutStore) Clear(ctx context.Context, name, id string) (bool, error) {
	if s.down.Load() {
		return false, errCutOff
	}
	return s.RedisStore.Clear(ctx, name, id)
}

func (s cutStore) ClearBefore(ctx context.Context, unlocks ...PastUnlock) error {
	if s.down.Load() {
		return errCutOff
	}
	return s.RedisStore.ClearBefore(ctx, unlocks...)
}

func (s cutStore) Hold(ctx context.Context, locks ...HeldLock) error {
	if s.down.Load() {
		return errCutOff
	}
	return s.RedisStore.Hold(ctx, locks...)
}

func (s cutStore) Reset(ctx context.Context, name, id string) error {
	if s.down.Load() {
		return errCutOff
	}
	return s.RedisStore.Reset(ctx, name, id)
}

// deafPinger answers no ping: the probe never fails back, and the runs
// call failback themselves, at the steps they choose.
type deafPinger struct{}

func (deafPinger) Ping(ctx context.Context) *redis.StatusCmd {
	cmd := redis.NewStatusCmd(ctx)
	cmd.SetErr(errCutOff)
	return cmd
}

// modelPolicies are the lockouts of the runs: an account's, whose locks
// the lockout log records, and a device's, whose it does not.
var modelPolicies = map[string]LockoutPolicy{
	"login_account": {Threshold: 3, Duration: 15 * time.Minute, MaxDuration: 24 * time.Hour},
	"login_device":  {Threshold: 3, Duration: 15 * time.Minute, MaxDuration: 24 * time.Hour},
}

// modelLog stands for the lockout log: the latest lock of each identity
// of login_account, ended by its unlock.
type modelLog struct {
	mu    sync.Mutex
	locks map[ruleID]HeldLock
}

func (l *modelLog) set(h HeldLock) {
	if h.Name != "login_account" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.locks == nil {
		l.locks = map[ruleID]HeldLock{}
	}
	l.locks[ruleID{h.Name, h.ID}] = h
}

func (l *modelLog) end(rid ruleID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.locks, rid)
}

func (l *modelLog) restore(context.Context) ([]HeldLock, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Collect(maps.Values(l.locks)), nil
}

// modelFailover is a replica's Failover over a Redis store of its own,
// cut off while the returned flag is set, the lockout log it reads, and
// the store as another replica, never cut off, reaches it.
func modelFailover(t *testing.T) (f *Failover, down *atomic.Bool, log *modelLog, other *RedisStore, rdb *redis.Client) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	other, err := NewRedisStore(rdb, prefix, modelPolicies)
	if err != nil {
		t.Fatal(err)
	}
	local, err := NewLocal(modelPolicies, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	down = new(atomic.Bool)
	f = NewFailover(cutStore{other, down}, local, deafPinger{}, FailLocal, nil)
	t.Cleanup(f.Close)
	f.SetLogged("login_account")
	log = &modelLog{}
	f.Restore = log.restore
	return f, down, log, other, rdb
}

// notesInconsistency reports how what f keeps for Redis disagrees with
// its indexes or exceeds its bounds; nil if it does not. It reads them
// under madeMu, as every change to them is made.
func notesInconsistency(f *Failover) error {
	f.madeMu.Lock()
	defer f.madeMu.Unlock()
	madeAt, lastMade, madeBy := map[ruleID][]int{}, map[ruleID]int{}, map[string]int{}
	for i, h := range f.made {
		rid := ruleID{h.Name, h.ID}
		lastMade[rid] = i
		madeBy[f.group(h.Name, h.ID)]++
		if !h.Until.IsZero() {
			madeAt[rid] = append(madeAt[rid], i)
		}
	}
	if !maps.EqualFunc(madeAt, f.madeAt, slices.Equal) {
		return fmt.Errorf("madeAt %v; the locks in force in made are at %v", f.madeAt, madeAt)
	}
	if !maps.Equal(lastMade, f.lastMade) {
		return fmt.Errorf("lastMade %v; made's last entries are at %v", f.lastMade, lastMade)
	}
	if !maps.Equal(madeBy, f.madeBy) {
		return fmt.Errorf("madeBy %v; made holds %v", f.madeBy, madeBy)
	}
	lastCleared, clearedBy := map[ruleID]int{}, map[string]int{}
	for i, c := range f.cleared {
		lastCleared[c.ruleID] = i
		clearedBy[f.group(c.name, c.id)]++
		if c.made > len(f.made) || i > 0 && c.made < f.cleared[i-1].made {
			return fmt.Errorf("cleared[%d] follows %d locks made, of %d; the one before %v", i, c.made, len(f.made), f.cleared[max(i-1, 0)])
		}
	}
	if !maps.Equal(lastCleared, f.lastCleared) {
		return fmt.Errorf("lastCleared %v; cleared's last entries are at %v", f.lastCleared, lastCleared)
	}
	if !maps.Equal(clearedBy, f.clearedBy) {
		return fmt.Errorf("clearedBy %v; cleared holds %v", f.clearedBy, clearedBy)
	}
	if f.handed > len(f.cleared) {
		return fmt.Errorf("%d of %d unlocks handed", f.handed, len(f.cleared))
	}
	if len(f.unlocked) != f.unlockOrder.Len() {
		return fmt.Errorf("%d unlocks noted, %d in their order", len(f.unlocked), f.unlockOrder.Len())
	}
	unlockedBy := map[string]int{}
	var last time.Time
	for e := f.unlockOrder.Front(); e != nil; e = e.Next() {
		u := e.Value.(*unlockNote)
		if f.unlocked[u.ruleID] != e {
			return fmt.Errorf("the unlock of %v in the order is not the one noted", u.ruleID)
		}
		if u.at.Before(last) {
			return fmt.Errorf("the unlock of %v at %v comes after one at %v", u.ruleID, u.at, last)
		}
		last = u.at
		unlockedBy[f.group(u.name, u.id)]++
	}
	if !maps.Equal(unlockedBy, f.unlockedBy) {
		return fmt.Errorf("unlockedBy %v; unlocked holds %v", f.unlockedBy, unlockedBy)
	}
	for what, by := range map[string]map[string]int{"locks": madeBy, "unlocks": clearedBy, "recent unlocks": unlockedBy} {
		for g, n := range by {
			if n > maxMade {
				return fmt.Errorf("%d %s kept for group %q, past %d", n, what, g, maxMade)
			}
		}
	}
	return nil
}

// modelLock is a lock as Redis keeps it: when it began and ends.
type modelLock struct{ since, until time.Time }

// refMade and refCleared are the reference's entries of made and cleared.
type refMade struct {
	rid   ruleID
	lock  modelLock
	alive bool
}

type refCleared struct {
	rid  ruleID
	made int
	at   time.Time
}

// modelRun is one run of a replica, a step at a time, beside its
// reference and its model of Redis.
type modelRun struct {
	t     *testing.T
	rng   *rand.Rand
	f     *Failover
	down  *atomic.Bool
	log   *modelLog
	other *RedisStore
	rdb   *redis.Client
	ids   []ruleID

	// The reference: made, cleared and unlocked kept the plain way, and
	// how many of made and cleared each group holds.
	made              []refMade
	cleared           []refCleared
	unlocked          map[ruleID]time.Time
	oldestUnlock      time.Time // of unlocked, as of its last sweep
	madeBy, clearedBy map[string]int
	// handed is how many of cleared a failback gives Redis first: those
	// are not moved to a later time.
	handed int
	// redis is what Redis must hold, by identity.
	redis map[ruleID]modelLock
	// floods counts the identities the floods named.
	floods int
}

func (m *modelRun) group(rid ruleID) string { return m.f.group(rid.name, rid.id) }

// noteMade is noteMade, the plain way.
func (m *modelRun) noteMade(rid ruleID, l modelLock) {
	if g := m.group(rid); m.madeBy[g] < maxMade {
		m.made = append(m.made, refMade{rid, l, true})
		m.madeBy[g]++
	}
}

// noteCleared is an unlock in process, the plain way: every lock of its
// identity in made ended, and one entry in cleared for the identity
// unless a lock of its own was made since its last (and that one is not
// among those a failback gives Redis first). A fresh identity, which has
// neither, is not looked for.
func (m *modelRun) noteCleared(rid ruleID, at time.Time, fresh bool) {
	if fresh {
		if g := m.group(rid); m.clearedBy[g] < maxMade {
			m.cleared = append(m.cleared, refCleared{rid, len(m.made), at})
			m.clearedBy[g]++
		}
		return
	}
	for i := range m.made {
		if m.made[i].rid == rid {
			m.made[i].alive = false
		}
	}
	for i := len(m.cleared) - 1; i >= m.handed; i-- {
		if m.cleared[i].rid != rid {
			continue
		}
		if !slices.ContainsFunc(m.made[m.cleared[i].made:], func(e refMade) bool { return e.rid == rid }) {
			m.cleared[i].at = at
			return
		}
		break
	}
	if g := m.group(rid); m.clearedBy[g] < maxMade {
		m.cleared = append(m.cleared, refCleared{rid, len(m.made), at})
		m.clearedBy[g]++
	}
}

// noteUnlocked is an unlock of login_account, the plain way: kept, one
// for each identity, unless the group (the rule's, all of them) holds
// maxMade younger than logWriteGrace.
func (m *modelRun) noteUnlocked(rid ruleID, at time.Time) {
	if rid.name != "login_account" {
		return
	}
	if _, ok := m.unlocked[rid]; !ok && len(m.unlocked) >= maxMade {
		// Swept only if the oldest may have aged past logWriteGrace.
		if at.Sub(m.oldestUnlock) > logWriteGrace {
			maps.DeleteFunc(m.unlocked, func(_ ruleID, t time.Time) bool { return at.Sub(t) > logWriteGrace })
			m.oldestUnlock = at
			for _, t := range m.unlocked {
				if t.Before(m.oldestUnlock) {
					m.oldestUnlock = t
				}
			}
		}
		if len(m.unlocked) >= maxMade {
			return
		}
	}
	m.unlocked[rid] = at
}

// hold is hold.lua in the model of Redis: the longer lock stays.
func (m *modelRun) hold(rid ruleID, l modelLock) {
	if !l.until.After(time.Now()) {
		return
	}
	if cur, ok := m.redis[rid]; !ok || cur.until.Before(l.until) {
		m.redis[rid] = l
	}
}

// failUntilLocked fails rid through s until it locks, or it is locked
// already; the lock made, if any.
func (m *modelRun) failUntilLocked(s Store, rid ruleID) (modelLock, bool) {
	for range modelPolicies[rid.name].Threshold + 1 {
		at := time.Now()
		fl, err := s.Fail(context.Background(), rid.name, rid.id, "")
		if err != nil {
			m.t.Fatal(err)
		}
		if fl.LockedNow {
			return modelLock{at, time.Now().Add(fl.LockedFor)}, true
		}
		if fl.Failures == 0 {
			return modelLock{}, false
		}
	}
	return modelLock{}, false
}

// step takes one random step: a lock, an unlock or a hold through the
// replica or through another, the start or the end of the replica's
// outage, or a flood of locks or unlocks while it lasts. It says what it
// did: a kind, a colon, and which identity.
func (m *modelRun) step() string {
	ctx := context.Background()
	rid := m.ids[m.rng.IntN(len(m.ids))]
	out := m.f.Degraded()
	switch r := m.rng.IntN(100); {
	case r < 55:
		return m.replicaStep(r, rid)
	case r < 63:
		l, ok := m.failUntilLocked(m.other, rid)
		if ok {
			m.log.set(HeldLock{Name: rid.name, ID: rid.id, Since: l.since, Until: l.until})
			m.redis[rid] = l
		}
		return fmt.Sprintf("lock elsewhere: %v, locked %v", rid, ok)
	case r < 71:
		if _, err := m.other.Clear(ctx, rid.name, rid.id); err != nil {
			m.t.Fatal(err)
		}
		m.log.end(rid)
		delete(m.redis, rid)
		return fmt.Sprintf("unlock elsewhere: %v", rid)
	case r < 75:
		h := m.heldLock(rid)
		if cur, ok := m.redis[rid]; ok && cur.until.After(time.Now()) && !cur.until.Before(h.Until) {
			// Redis keeps one lock, the longer: a shorter one held over
			// it would be lost to an unlock that ends the longer one.
			return "nothing: no shorter hold elsewhere"
		}
		if err := m.other.Hold(ctx, h); err != nil {
			m.t.Fatal(err)
		}
		m.log.set(h)
		m.hold(rid, modelLock{h.Since, h.Until})
		return fmt.Sprintf("hold elsewhere: %v until %v", rid, h.Until)
	case r < 96:
		if !out {
			m.down.Store(true)
			_ = m.f.Check(ctx)
			if !m.f.Degraded() {
				m.t.Fatal("not degraded, cut off from Redis")
			}
			return "cut off:"
		}
		m.down.Store(false)
		// Steps in process as the failback hands the limits back, after
		// its scans, before Redis decides.
		var during []string
		m.handed = len(m.cleared)
		// Their identities are few, so that an unlock and a lock of one
		// meet there.
		m.f.scanning = func() {
			for range m.rng.IntN(6) {
				time.Sleep(3 * time.Millisecond)
				during = append(during, m.replicaStep(m.rng.IntN(55), m.ids[m.rng.IntN(2)]))
			}
		}
		ok := m.f.failback()
		m.f.scanning = nil
		if !ok || m.f.Degraded() {
			m.t.Fatal("the failback did not hand the limits back to a Redis that answers")
		}
		m.failedBack()
		return fmt.Sprintf("failback: with %q during it", during)
	case r < 98 && out:
		locks := make([]HeldLock, 7000)
		for i := range locks {
			m.floods++
			locks[i] = HeldLock{Name: "login_device", ID: fmt.Sprint("flood-", m.floods), Since: time.Now(), Until: time.Now().Add(time.Hour), Level: 1}
		}
		if err := m.f.Hold(ctx, locks...); err != nil {
			m.t.Fatal(err)
		}
		for _, h := range locks {
			m.noteMade(ruleID{h.Name, h.ID}, modelLock{h.Since, h.Until})
		}
		return "flood of locks:"
	case out:
		for range 7000 {
			m.floods++
			flood := ruleID{"login_account", fmt.Sprint("flood-", m.floods)}
			at := time.Now()
			if _, err := m.f.Clear(ctx, flood.name, flood.id); err != nil {
				m.t.Fatal(err)
			}
			m.noteUnlocked(flood, at)
			m.noteCleared(flood, at, true)
		}
		return "flood of unlocks:"
	}
	return "nothing:"
}

// replicaStep is a lock (r below 25), an unlock (below 47) or a hold
// (below 55) of rid through the replica.
func (m *modelRun) replicaStep(r int, rid ruleID) string {
	ctx := context.Background()
	out := m.f.Degraded()
	switch {
	case r < 25:
		l, ok := m.failUntilLocked(m.f, rid)
		if ok {
			m.log.set(HeldLock{Name: rid.name, ID: rid.id, Since: l.since, Until: l.until})
			if out {
				m.noteMade(rid, l)
			} else {
				m.redis[rid] = l
			}
		}
		return fmt.Sprintf("lock here: %v, locked %v", rid, ok)
	case r < 47:
		at := time.Now()
		if _, err := m.f.Clear(ctx, rid.name, rid.id); err != nil {
			m.t.Fatal(err)
		}
		m.log.end(rid)
		m.noteUnlocked(rid, at)
		if out {
			m.noteCleared(rid, at, false)
		} else {
			delete(m.redis, rid)
		}
		return fmt.Sprintf("unlock here: %v", rid)
	default:
		h := m.heldLock(rid)
		if err := m.f.Hold(ctx, h); err != nil {
			m.t.Fatal(err)
		}
		m.log.set(h)
		if out {
			m.noteMade(rid, modelLock{h.Since, h.Until})
		} else {
			m.hold(rid, modelLock{h.Since, h.Until})
		}
		return fmt.Sprintf("hold here: %v until %v", rid, h.Until)
	}
}

// heldLock is an administrator's lock of rid from now: some shorter than
// a run, to end on their own, most longer than any the failures make.
func (m *modelRun) heldLock(rid ruleID) HeldLock {
	d := time.Duration(1+m.rng.IntN(48)) * time.Hour
	if m.rng.IntN(4) == 0 {
		d = time.Duration(200+m.rng.IntN(1000)) * time.Millisecond
	}
	now := time.Now()
	return HeldLock{Name: rid.name, ID: rid.id, Since: now, Until: now.Add(d), Level: 1 + m.rng.IntN(3)}
}

// failedBack is a failback, one step at a time, in the model of Redis:
// each unlock made in process ends a lock that began no later (in
// milliseconds, as ClearBefore gives it), then the lockout log's locks
// that began after their identity's last unlock, then the locks made in
// process still in force, each the longer where one is there already.
func (m *modelRun) failedBack() {
	lastUnlock := maps.Clone(m.unlocked)
	for _, c := range m.cleared {
		if l, ok := m.redis[c.rid]; ok && l.since.UnixMilli() <= c.at.UnixMilli() {
			delete(m.redis, c.rid)
		}
		if c.at.After(lastUnlock[c.rid]) {
			lastUnlock[c.rid] = c.at
		}
	}
	inLog, _ := m.log.restore(context.Background())
	listed := map[ruleID]bool{}
	for _, h := range inLog {
		rid := ruleID{h.Name, h.ID}
		listed[rid] = true
		if at, ok := lastUnlock[rid]; !ok || h.Since.After(at) {
			m.hold(rid, modelLock{h.Since, h.Until})
		}
	}
	for _, e := range m.made {
		if e.alive && (e.rid.name != "login_account" || listed[e.rid] || time.Since(e.lock.since) < logWriteGrace) {
			m.hold(e.rid, e.lock)
		}
	}
	m.made, m.cleared, m.madeBy, m.clearedBy, m.handed = nil, nil, map[string]int{}, map[string]int{}, 0
}

// checkReference compares what f keeps with the reference.
func (m *modelRun) checkReference(step int, what string) {
	m.t.Helper()
	if err := notesInconsistency(m.f); err != nil {
		m.t.Fatalf("step %d (%s): %v", step, what, err)
	}
	m.f.madeMu.Lock()
	defer m.f.madeMu.Unlock()
	if len(m.f.made) != len(m.made) {
		m.t.Fatalf("step %d (%s): %d locks made kept, the reference %d", step, what, len(m.f.made), len(m.made))
	}
	for i, h := range m.f.made {
		if e := m.made[i]; (ruleID{h.Name, h.ID}) != e.rid || h.Until.IsZero() == e.alive {
			m.t.Fatalf("step %d (%s): made[%d] is %v ended %v, the reference's %v in force %v", step, what, i, ruleID{h.Name, h.ID}, h.Until.IsZero(), e.rid, e.alive)
		}
	}
	if len(m.f.cleared) != len(m.cleared) {
		m.t.Fatalf("step %d (%s): %d unlocks kept, the reference %d", step, what, len(m.f.cleared), len(m.cleared))
	}
	for i, c := range m.f.cleared {
		if e := m.cleared[i]; c.ruleID != e.rid || c.made != e.made {
			m.t.Fatalf("step %d (%s): cleared[%d] is %v after %d, the reference's %v after %d", step, what, i, c.ruleID, c.made, e.rid, e.made)
		}
	}
	// The reference forgets its unlocks past logWriteGrace only when
	// full; the replica also at each outage and failback.
	for rid := range m.f.unlocked {
		if _, ok := m.unlocked[rid]; !ok {
			m.t.Fatalf("step %d (%s): an unlock of %v kept that the reference has not", step, what, rid)
		}
	}
	for rid, at := range m.unlocked {
		if _, ok := m.f.unlocked[rid]; !ok && time.Since(at) < logWriteGrace-5*time.Second {
			m.t.Fatalf("step %d (%s): the unlock of %v made %v ago not kept", step, what, rid, time.Since(at))
		}
	}
}

// checkRedis compares the locks in Redis with the model's, but for those
// within two seconds of their end, to a tolerance of two: a lock made
// through Fail is taken to end its length after the call returned.
func (m *modelRun) checkRedis(step int, what string) {
	m.t.Helper()
	for _, rid := range m.ids {
		pttl, err := m.rdb.PTTL(context.Background(), lockKey(m.other.lockouts[rid.name].keys, rid.id)).Result()
		if err != nil {
			m.t.Fatal(err)
		}
		var left time.Duration
		if l, ok := m.redis[rid]; ok {
			left = time.Until(l.until)
		}
		if left.Abs() < 2*time.Second {
			continue
		}
		if left < 0 {
			left = 0
		}
		got := max(pttl, 0)
		if (got - left).Abs() > 2*time.Second {
			m.t.Fatalf("step %d (%s): %v locked in Redis for %v; want %v", step, what, rid, got, left)
		}
	}
}

// TestFailoverNotesAgainstAReference runs a replica, a step at a time,
// through locks and unlocks in process and in Redis, outages, failbacks
// with locks and unlocks in process as they hand the limits back, and
// floods that fill the bounds: what it keeps agrees with its indexes and
// with the reference, and Redis holds what the model says.
func TestFailoverNotesAgainstAReference(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			f, down, log, other, rdb := modelFailover(t)
			m := &modelRun{t: t, rng: rand.New(rand.NewPCG(seed, 7)), f: f, down: down, log: log, other: other, rdb: rdb,
				unlocked: map[ruleID]time.Time{}, redis: map[ruleID]modelLock{}, madeBy: map[string]int{}, clearedBy: map[string]int{}}
			for i := range 4 {
				m.ids = append(m.ids, ruleID{"login_account", fmt.Sprint("acct-", i)}, ruleID{"login_device", fmt.Sprint("device-", i)})
			}
			kinds := map[string]int{}
			for i := range 400 {
				what := m.step()
				kind, _, _ := strings.Cut(what, ":")
				kinds[kind]++
				// Thousands kept after a flood take a while to compare:
				// then every eighth step, and each flood and failback.
				switch kind {
				case "flood of locks", "flood of unlocks", "failback":
					m.checkReference(i, what)
				default:
					if len(m.made)+len(m.cleared)+len(m.unlocked) < 1000 || i%8 == 0 {
						m.checkReference(i, what)
					}
				}
				m.checkRedis(i, what)
				// Steps a few milliseconds apart: a lock and an unlock in
				// one millisecond may be put in either order.
				time.Sleep(3 * time.Millisecond)
			}
			t.Logf("steps: %v; %d identities flooded", kinds, m.floods)
		})
	}
}

// TestFailoverNotesUnderConcurrency has locks, unlocks and holds, and
// floods of them, run at once on a replica whose Redis comes and goes,
// whose failbacks meet new locks and unlocks and a Redis lost again
// before they are over, while a reader checks, every millisecond or so,
// that what is kept agrees with its indexes and keeps within its bounds.
// Once the steps stop and a failback is over, nothing is kept.
func TestFailoverNotesUnderConcurrency(t *testing.T) {
	f, down, log, _, _ := modelFailover(t)
	var lostMidway atomic.Int64
	scans := rand.New(rand.NewPCG(1, 1))
	var scansMu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	f.scanning = func() {
		scansMu.Lock()
		r, after := scans.IntN(3), time.Duration(scans.IntN(3000))*time.Microsecond
		scansMu.Unlock()
		switch r {
		case 0:
			// Lost again before the failback's writes: it keeps the
			// limits in process.
			down.Store(true)
			lostMidway.Add(1)
		case 1:
			// Lost again soon, before the failback is over or after: it
			// goes back to the limits in process, keeping what Redis did
			// not take.
			wg.Go(func() {
				time.Sleep(after)
				down.Store(true)
				lostMidway.Add(1)
			})
		}
	}
	var steps atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			ctx := context.Background()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				name := []string{"login_account", "login_device"}[rng.IntN(2)]
				id := fmt.Sprint("id-", rng.IntN(6))
				switch r := rng.IntN(100); {
				case r < 40:
					if _, err := f.Fail(ctx, name, id, fmt.Sprint(n)); err != nil {
						t.Error(err)
					}
				case r < 75:
					if _, err := f.Clear(ctx, name, id); err != nil {
						t.Error(err)
					}
					log.end(ruleID{name, id})
				case r < 90:
					h := HeldLock{Name: name, ID: id, Since: time.Now(), Until: time.Now().Add(time.Duration(1+rng.IntN(2000)) * time.Millisecond), Level: 1}
					if err := f.Hold(ctx, h); err != nil {
						t.Error(err)
					}
					log.set(h)
				case r < 95:
					locks := make([]HeldLock, 8000)
					for i := range locks {
						locks[i] = HeldLock{Name: "login_device", ID: fmt.Sprint("flood-", w, "-", n, "-", i), Since: time.Now(), Until: time.Now().Add(time.Minute), Level: 1}
					}
					if err := f.Hold(ctx, locks...); err != nil {
						t.Error(err)
					}
				default:
					if !f.Degraded() {
						continue // each would cost a round trip
					}
					for i := range 8000 {
						if _, err := f.Clear(ctx, "login_account", fmt.Sprint("flood-", w, "-", n, "-", i)); err != nil {
							t.Error(err)
						}
					}
				}
				steps.Add(1)
			}
		})
	}
	checks, most := 0, [3]int{}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := notesInconsistency(f); err != nil {
				t.Error(err)
				return
			}
			checks++
			f.madeMu.Lock()
			most = [3]int{max(most[0], len(f.made)), max(most[1], len(f.cleared)), max(most[2], len(f.unlocked))}
			f.madeMu.Unlock()
			// Each check holds madeMu a while: the steps get it too.
			time.Sleep(time.Millisecond)
		}
	})
	ctx := context.Background()
	failbacks := 0
	for round := range 24 {
		down.Store(true)
		_ = f.Check(ctx)
		time.Sleep(time.Duration(5+round%7*5) * time.Millisecond)
		down.Store(false)
		if f.failback() {
			failbacks++
		}
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		if t.Failed() {
			break
		}
	}
	close(stop)
	wg.Wait()
	f.scanning = nil
	down.Store(false)
	// What a failback that Redis was lost in kept is given at the next.
	for i := 0; ; i++ {
		f.madeMu.Lock()
		kept := len(f.made) + len(f.cleared)
		f.madeMu.Unlock()
		if kept == 0 && !f.Degraded() {
			break
		}
		if i == 10 {
			t.Fatalf("ten failbacks and still %d locks and unlocks kept for Redis, degraded %v", kept, f.Degraded())
		}
		f.failback()
	}
	if err := notesInconsistency(f); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d steps, %d failbacks (%d with Redis lost midway), %d checks; at most %d locks, %d unlocks and %d recent unlocks kept",
		steps.Load(), failbacks, lostMidway.Load(), checks, most[0], most[1], most[2])
}
