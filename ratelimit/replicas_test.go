package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

// partition cuts one replica off a Redis that keeps its data and stays up
// for the others (a network partition): while down, every call the
// replica makes fails as a refused dial does, which IsOutage counts.
type partition struct{ down atomic.Bool }

var errPartitioned = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

// partitioned is the shared store as one replica reaches it.
type partitioned struct {
	ratelimit.Store
	p *partition
}

func (s partitioned) AllowAll(ctx context.Context, rules ...ratelimit.Rule) (ratelimit.Decision, error) {
	if s.p.down.Load() {
		return ratelimit.Decision{}, errPartitioned
	}
	return s.Store.AllowAll(ctx, rules...)
}

func (s partitioned) Fail(ctx context.Context, name, id, attempt string) (ratelimit.Failure, error) {
	if s.p.down.Load() {
		return ratelimit.Failure{}, errPartitioned
	}
	return s.Store.Fail(ctx, name, id, attempt)
}

func (s partitioned) Clear(ctx context.Context, name, id string) (bool, error) {
	if s.p.down.Load() {
		return false, errPartitioned
	}
	return s.Store.Clear(ctx, name, id)
}

func (s partitioned) ClearBefore(ctx context.Context, unlocks ...ratelimit.PastUnlock) error {
	if s.p.down.Load() {
		return errPartitioned
	}
	return s.Store.(*ratelimit.RedisStore).ClearBefore(ctx, unlocks...)
}

func (s partitioned) Hold(ctx context.Context, locks ...ratelimit.HeldLock) error {
	if s.p.down.Load() {
		return errPartitioned
	}
	return s.Store.Hold(ctx, locks...)
}

func (s partitioned) Reset(ctx context.Context, name, id string) error {
	if s.p.down.Load() {
		return errPartitioned
	}
	return s.Store.Reset(ctx, name, id)
}

// partitionedPinger is the replica's probe through the same partition.
type partitionedPinger struct {
	rdb *redis.Client
	p   *partition
}

func (pp partitionedPinger) Ping(ctx context.Context) *redis.StatusCmd {
	if pp.p.down.Load() {
		cmd := redis.NewStatusCmd(ctx)
		cmd.SetErr(errPartitioned)
		return cmd
	}
	return pp.rdb.Ping(ctx)
}

// sharedRedis is the Redis store with lockouts pols that a test's
// replicas share, and its client.
func sharedRedis(t *testing.T, pols map[string]ratelimit.LockoutPolicy) (*redis.Client, *ratelimit.RedisStore) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	shared, err := ratelimit.NewRedisStore(rdb, prefix, pols)
	if err != nil {
		t.Fatal(err)
	}
	return rdb, shared
}

// failoverOver is a replica's Failover over shared, as it reaches it, with
// local in process, its probe cut off by p as shared is.
func failoverOver(t *testing.T, shared, local ratelimit.Store, rdb *redis.Client, p *partition) *ratelimit.Failover {
	t.Helper()
	f := ratelimit.NewFailover(shared, local, partitionedPinger{rdb, p}, ratelimit.FailLocal, nil)
	t.Cleanup(f.Close)
	return f
}

// replica is one replica's Failover over the Redis store shared with the
// others, cut off from it while p is down.
func replica(t *testing.T, shared ratelimit.Store, rdb *redis.Client, p *partition) *ratelimit.Failover {
	t.Helper()
	return failoverOver(t, partitioned{shared, p}, newLocal(t), rdb, p)
}

// replicaWith is a replica over a Redis store of its own, both stores
// with the lockouts pols.
func replicaWith(t *testing.T, pols map[string]ratelimit.LockoutPolicy) (*ratelimit.Failover, *partition, *ratelimit.RedisStore) {
	t.Helper()
	rdb, shared := sharedRedis(t, pols)
	local, err := ratelimit.NewLocal(pols, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &partition{}
	f := failoverOver(t, partitioned{shared, p}, local, rdb, p)
	f.Restore = newLockLog().restore
	return f, p, shared
}

// hookStore is a partitioned shared store that calls onHold with the
// number of each Hold made while Redis answers, failing the Hold with
// what onHold returns (a Redis that stopped answering, say), and can
// answer a Clear with an error reply.
type hookStore struct {
	partitioned
	holds    atomic.Int64
	onHold   func(n int64) error
	clearErr func(id string) error
}

func (h *hookStore) Hold(ctx context.Context, locks ...ratelimit.HeldLock) error {
	if !h.p.down.Load() && h.onHold != nil {
		if err := h.onHold(h.holds.Add(1)); err != nil {
			return err
		}
	}
	return h.partitioned.Hold(ctx, locks...)
}

func (h *hookStore) Clear(ctx context.Context, name, id string) (bool, error) {
	if !h.p.down.Load() && h.clearErr != nil {
		if err := h.clearErr(id); err != nil {
			return false, err
		}
	}
	return h.partitioned.Clear(ctx, name, id)
}

// ClearBefore answers each unlock whose id clearErr fails with that error,
// as a pipeline's command's own error, and gives Redis the others.
func (h *hookStore) ClearBefore(ctx context.Context, unlocks ...ratelimit.PastUnlock) error {
	var first error
	if !h.p.down.Load() && h.clearErr != nil {
		unlocks = slices.DeleteFunc(slices.Clone(unlocks), func(u ratelimit.PastUnlock) bool {
			err := h.clearErr(u.ID)
			if err != nil && first == nil {
				first = err
			}
			return err != nil
		})
	}
	if err := h.partitioned.ClearBefore(ctx, unlocks...); err != nil {
		return err
	}
	return first
}

// hookedReplica is a replica over a hookStore of its own Redis store.
func hookedReplica(t *testing.T) (*ratelimit.Failover, *hookStore, *partition, *ratelimit.RedisStore) {
	t.Helper()
	rdb, shared := sharedRedis(t, policies)
	p := &partition{}
	hs := &hookStore{partitioned: partitioned{shared, p}}
	f := failoverOver(t, hs, newLocal(t), rdb, p)
	f.Restore = newLockLog().restore
	return f, hs, p, shared
}

// lockInProcess fails id under login_account until it locks.
func lockInProcess(t *testing.T, f *ratelimit.Failover, id string) {
	t.Helper()
	lockRule(t, f, owner.Name, id)
}

// lockRule fails id under the rule name until it locks.
func lockRule(t *testing.T, f *ratelimit.Failover, name, id string) {
	t.Helper()
	for {
		fl, err := f.Fail(context.Background(), name, id, "")
		if err != nil {
			t.Error(err)
			return
		}
		if fl.LockedNow {
			return
		}
	}
}

// replyErr is an error reply from Redis.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// lockLog stands for the lockout log in Postgres, which Restore reads.
type lockLog struct {
	in atomic.Pointer[[]ratelimit.HeldLock]
}

func newLockLog(locks ...ratelimit.HeldLock) *lockLog {
	l := &lockLog{}
	l.set(locks...)
	return l
}

func (l *lockLog) set(locks ...ratelimit.HeldLock) { l.in.Store(&locks) }

func (l *lockLog) restore(context.Context) ([]ratelimit.HeldLock, error) { return *l.in.Load(), nil }

var owner = ratelimit.Rule{Name: "login_account", ID: "owner@example.com", Limit: ratelimit.PerMinute(100), Lockable: true}

// TestUnlockElsewhereEndsTheInProcessLock: an administrator locks an
// account through replica A, which also keeps the lock in process, and
// unlocks it through replica B. Neither Redis nor the lockout log holds a
// lock any more, so when A then loses Redis the owner signs in.
func TestUnlockElsewhereEndsTheInProcessLock(t *testing.T) {
	rdb, shared := sharedRedis(t, policies)
	pa, pb := &partition{}, &partition{}
	a, b := replica(t, shared, rdb, pa), replica(t, shared, rdb, pb)
	log := newLockLog()
	a.Restore, b.Restore = log.restore, log.restore

	lock := ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Until: time.Now().Add(24 * time.Hour), Level: 1}
	if err := a.Hold(t.Context(), lock); err != nil {
		t.Fatal(err)
	}
	log.set(lock)
	if was, err := b.Clear(t.Context(), owner.Name, owner.ID); err != nil || !was {
		t.Fatalf("unlock through B: %v, %v", was, err)
	}
	log.set()

	pa.down.Store(true)
	d, err := a.AllowAll(t.Context(), owner)
	if !a.Degraded() {
		t.Fatal("A not degraded while cut off")
	}
	if err != nil || !d.Allowed {
		t.Fatalf("the owner at A cut off from Redis, after the unlock: %+v, %v; want admitted", d, err)
	}
}

// TestRestoredLockEndedElsewhere: a lock A loaded from the lockout log in
// one outage, and ended through B (a password reset) once Redis was back,
// is not in force at A in its next outage.
func TestRestoredLockEndedElsewhere(t *testing.T) {
	rdb, shared := sharedRedis(t, policies)
	pa, pb := &partition{}, &partition{}
	a, b := replica(t, shared, rdb, pa), replica(t, shared, rdb, pb)
	var fl ratelimit.Failure
	for !fl.LockedNow {
		var err error
		if fl, err = shared.Fail(t.Context(), owner.Name, owner.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	log := newLockLog(ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Until: time.Now().Add(fl.LockedFor), Level: fl.Level})
	a.Restore, b.Restore = log.restore, log.restore

	pa.down.Store(true)
	if d, err := a.AllowAll(t.Context(), owner); err != nil || !d.Results[0].Locked {
		t.Fatalf("first outage: %+v, %v; want refused as locked", d, err)
	}
	pa.down.Store(false)
	waitRecovered(t, a)
	if was, err := b.Clear(t.Context(), owner.Name, owner.ID); err != nil || !was {
		t.Fatalf("reset through B: %v, %v", was, err)
	}
	log.set()

	pa.down.Store(true)
	if d, err := a.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Fatalf("second outage, after the reset: %+v, %v; want admitted", d, err)
	}
	// Its failures were forgotten with the lock: one more is not a lock.
	if f, err := a.Fail(t.Context(), owner.Name, owner.ID, ""); err != nil || f.LockedNow || f.Failures != 1 {
		t.Fatalf("a failure in the second outage: %+v, %v; want the first of a run", f, err)
	}
}

// TestLockMadeWhileRedisComesBack: a lock made in process after the
// failback began (the lockouts in force read, the shared limits not yet
// in charge) is in Redis once they are.
func TestLockMadeWhileRedisComesBack(t *testing.T) {
	rdb, shared := sharedRedis(t, policies)
	p := &partition{}
	f := replica(t, shared, rdb, p)
	var during atomic.Bool
	f.Restore = func(context.Context) ([]ratelimit.HeldLock, error) {
		if !p.down.Load() && during.CompareAndSwap(false, true) {
			// The failback's read of the lockout log has run; guesses
			// still decided in process lock the owner, before the
			// service has written the lock where Restore reads.
			lockInProcess(t, f, owner.ID)
		}
		return nil, nil
	}
	p.down.Store(true)
	if _, err := f.AllowAll(t.Context(), owner); err != nil {
		t.Fatal(err)
	}
	p.down.Store(false)
	waitRecovered(t, f)
	if !during.Load() {
		t.Fatal("the failback read no lockouts")
	}
	d, err := f.AllowAll(t.Context(), owner)
	if err != nil || d.Allowed || !d.Results[0].Locked {
		t.Fatalf("a guess once back on Redis: %+v, %v; want refused as locked", d, err)
	}
}

// TestFailbackWaitsForTheLocks: a replica whose Redis answers pings again
// but cannot yet take the lockouts in force stays on its in-process limits,
// and tries again, rather than let Redis decide without the locks.
func TestFailbackWaitsForTheLocks(t *testing.T) {
	f, hs, p, _ := hookedReplica(t)
	f.Restore = newLockLog(ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Until: time.Now().Add(time.Hour), Level: 1}).restore
	var failing atomic.Bool
	hs.onHold = func(int64) error {
		if failing.Load() {
			return fmt.Errorf("ratelimit: holding locks: %w", context.DeadlineExceeded)
		}
		return nil
	}

	p.down.Store(true)
	if d, err := f.AllowAll(t.Context(), owner); err != nil || !d.Results[0].Locked {
		t.Fatalf("during the outage: %+v, %v; want refused as locked", d, err)
	}
	failing.Store(true)
	p.down.Store(false)
	for deadline := time.Now().Add(10 * time.Second); hs.holds.Load() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d tries to put the locks back in 10s; want them tried again", hs.holds.Load())
		}
	}
	if !f.Degraded() {
		t.Fatal("back on Redis although it holds none of the lockouts in force")
	}
	failing.Store(false)
	waitRecovered(t, f)
	if d, err := f.AllowAll(t.Context(), owner); err != nil || d.Allowed || !d.Results[0].Locked {
		t.Fatalf("once back on Redis: %+v, %v; want refused as locked", d, err)
	}
}

// TestHoldManyLocks: Hold puts every one of tens of thousands of locks in
// Redis (the lockouts in force after a large attack, put back when Redis
// returns), into a Redis that has lost its scripts.
func TestHoldManyLocks(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLockouts(t, rdb, prefix)
	if err := rdb.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	const n = 20_000
	locks := make([]ratelimit.HeldLock, n)
	until := time.Now().Add(time.Hour)
	for i := range locks {
		locks[i] = ratelimit.HeldLock{Name: "login_account", ID: fmt.Sprint("held-", i, "@example.com"), Until: until, Level: 2}
	}
	if err := l.Hold(t.Context(), locks...); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		st, err := l.Status(t.Context(), locks[i].ID)
		if err != nil || !st.Locked || st.Level != 2 {
			t.Fatalf("lock %d: %+v, %v; want locked at level 2", i, st, err)
		}
	}
	if err := l.Hold(t.Context()); err != nil {
		t.Fatalf("holding nothing: %v", err)
	}
	var wrong redis.Error
	if err := l.Hold(t.Context(), locks[0]); errors.As(err, &wrong) {
		t.Fatalf("holding again: %v", err)
	}
}

// TestUnlockDuringAnOutageStaysAfterIt: an account locked in process
// during an outage and unlocked before Redis is back (an administrator, a
// password reset) is not locked again at the failback, and a lock Redis
// held from before the outage, which it kept (a partition), ends too.
func TestUnlockDuringAnOutageStaysAfterIt(t *testing.T) {
	rdb, shared := sharedRedis(t, policies)
	p := &partition{}
	f := replica(t, shared, rdb, p)
	log := newLockLog()
	f.Restore = log.restore
	before := ratelimit.Rule{Name: "login_account", ID: "before@example.com", Limit: ratelimit.PerMinute(100), Lockable: true}
	if err := shared.Hold(t.Context(), ratelimit.HeldLock{Name: before.Name, ID: before.ID, Until: time.Now().Add(time.Hour), Level: 1}); err != nil {
		t.Fatal(err)
	}

	p.down.Store(true)
	lockInProcess(t, f, owner.ID)
	if !f.Degraded() {
		t.Fatal("not degraded while cut off")
	}
	for _, r := range []ratelimit.Rule{owner, before} {
		if was, err := f.Clear(t.Context(), r.Name, r.ID); err != nil || (r == owner && !was) {
			t.Fatalf("unlock of %s during the outage: %v, %v", r.ID, was, err)
		}
	}
	p.down.Store(false)
	waitRecovered(t, f)
	for _, r := range []ratelimit.Rule{owner, before} {
		if d, err := f.AllowAll(t.Context(), r); err != nil || !d.Allowed {
			t.Errorf("%s, unlocked during the outage, once back on Redis: %+v, %v; want admitted", r.ID, d, err)
		}
	}
}

// TestLateLockOutlivesAFlap: a lock made in process during the failback,
// which Redis could not be given because it went away again at once, is
// kept: in process in the next outage, and in Redis after it.
func TestLateLockOutlivesAFlap(t *testing.T) {
	f, hs, p, _ := hookedReplica(t)
	device := ratelimit.Rule{Name: "login_device", ID: "device-1", Limit: ratelimit.PerMinute(100), Lockable: true}
	f.Restore = newLockLog(ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Until: time.Now().Add(time.Hour), Level: 1}).restore
	hs.onHold = func(n int64) error {
		if n == 1 {
			// The failback's first Hold, Redis not yet in charge.
			// Decided in process still: a device's lock, which no
			// lockout log records.
			lockRule(t, f, device.Name, device.ID)
		}
		return nil
	}
	var flapped atomic.Bool
	f.OnChange = func(degraded bool) {
		if !degraded && flapped.CompareAndSwap(false, true) {
			p.down.Store(true) // gone again as soon as it was back
		}
	}
	p.down.Store(true)
	if _, err := f.AllowAll(t.Context(), device); err != nil {
		t.Fatal(err)
	}
	p.down.Store(false)
	for !flapped.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	// The next outage: the device is still locked in process.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d, err := f.AllowAll(t.Context(), device)
		if err != nil {
			t.Fatal(err)
		}
		if f.Degraded() {
			if d.Allowed {
				t.Fatalf("the device in the next outage: %+v; want refused as locked", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no second outage")
		}
	}
	p.down.Store(false)
	waitRecovered(t, f)
	if d, err := f.AllowAll(t.Context(), device); err != nil || d.Allowed || !d.Results[0].Locked {
		t.Fatalf("the device once back on Redis: %+v, %v; want refused as locked", d, err)
	}
}

// TestFloodOfOneRulesLocksKeepsOthers: a flood of one rule's locks made
// in process during an outage (an application's accounts, which whoever
// holds its key names at will) fills that rule's places among the locks
// kept for Redis, not another rule's: a device locked after it is still
// locked once Redis is back.
func TestFloodOfOneRulesLocksKeepsOthers(t *testing.T) {
	one := ratelimit.LockoutPolicy{Threshold: 1, Duration: time.Hour, MaxDuration: time.Hour}
	pols := map[string]ratelimit.LockoutPolicy{"login_account": one, "login_device": one}
	f, p, _ := replicaWith(t, pols)
	p.down.Store(true)
	for i := range ratelimit.MaxMade + 100 {
		if fl, err := f.Fail(t.Context(), "login_account", fmt.Sprint("made-up-", i), ""); err != nil || !fl.LockedNow {
			t.Fatalf("failure %d: %+v, %v", i, fl, err)
		}
	}
	if fl, err := f.Fail(t.Context(), "login_device", "device-1", ""); err != nil || !fl.LockedNow {
		t.Fatalf("the device's failure: %+v, %v", fl, err)
	}
	p.down.Store(false)
	waitRecovered(t, f)
	device := ratelimit.Rule{Name: "login_device", ID: "device-1", Limit: ratelimit.PerMinute(100), Lockable: true}
	if d, err := f.AllowAll(t.Context(), device); err != nil || d.Allowed || !d.Results[0].Locked {
		t.Fatalf("the device once back on Redis: %+v, %v; want refused as locked", d, err)
	}
}

// TestUnlockDuringTheFailback: an unlock that comes while the failback
// gives Redis the locks made in process, or while it gives the last ones
// after Redis took over, is not undone by it.
func TestUnlockDuringTheFailback(t *testing.T) {
	for _, at := range []int64{1, 2} {
		t.Run(fmt.Sprint("hold ", at), func(t *testing.T) {
			f, hs, p, _ := hookedReplica(t)
			p.down.Store(true)
			lockInProcess(t, f, "someone-else@example.com")
			if at == 1 {
				lockInProcess(t, f, owner.ID)
			}
			unlocked := make(chan struct{})
			hs.onHold = func(n int64) error {
				if at == 2 && n == 1 {
					// Decided in process still, and given to Redis
					// after it took over.
					lockInProcess(t, f, owner.ID)
				}
				if n == at {
					go func() {
						defer close(unlocked)
						if _, err := f.Clear(context.Background(), owner.Name, owner.ID); err != nil {
							t.Errorf("unlock: %v", err)
						}
					}()
				}
				return nil
			}
			p.down.Store(false)
			waitRecovered(t, f)
			<-unlocked
			// The failback may still be giving Redis its last locks,
			// and then ends again the locks unlocked meanwhile.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				st, e := f.AllowAll(t.Context(), owner)
				if e == nil && st.Allowed {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the owner, unlocked during the failback: %+v, %v; want admitted", st.Results, e)
				}
			}
		})
	}
}

// TestFailbackPastAnErrorReply: an error reply to one of the failback's
// calls (an unlock Redis refuses) keeps neither the other unlocks nor the
// lockouts in force from Redis.
func TestFailbackPastAnErrorReply(t *testing.T) {
	f, hs, p, shared := hookedReplica(t)
	other := ratelimit.Rule{Name: owner.Name, ID: "other@example.com", Limit: owner.Limit, Lockable: true}
	logged := ratelimit.Rule{Name: owner.Name, ID: "logged@example.com", Limit: owner.Limit, Lockable: true}
	if err := shared.Hold(t.Context(), ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Until: time.Now().Add(time.Hour), Level: 1}); err != nil {
		t.Fatal(err)
	}
	f.Restore = newLockLog(ratelimit.HeldLock{Name: logged.Name, ID: logged.ID, Until: time.Now().Add(time.Hour), Level: 1}).restore
	hs.clearErr = func(id string) error {
		if id == other.ID {
			return replyErr("NOPERM this user has no permissions")
		}
		return nil
	}
	p.down.Store(true)
	if _, err := f.AllowAll(t.Context(), owner); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{other.ID, owner.ID} {
		if _, err := f.Clear(t.Context(), owner.Name, id); err != nil {
			t.Fatal(err)
		}
	}
	p.down.Store(false)
	waitRecovered(t, f)
	if d, err := f.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Errorf("the owner, unlocked during the outage, back on Redis: %+v, %v; want admitted", d.Results, err)
	}
	if d, err := f.AllowAll(t.Context(), logged); err != nil || d.Allowed {
		t.Errorf("a lock of the lockout log, back on Redis: %+v, %v; want refused", d.Results, err)
	}
}

// TestOutageDuringTheFailback: Redis goes away again while the failback
// gives it the last locks made in process, and a new lock is made in
// process in the new outage: both reach Redis at the next failback.
func TestOutageDuringTheFailback(t *testing.T) {
	f, hs, p, _ := hookedReplica(t)
	y := ratelimit.Rule{Name: owner.Name, ID: "y@example.com", Limit: owner.Limit, Lockable: true}
	late := ratelimit.Rule{Name: owner.Name, ID: "late@example.com", Limit: owner.Limit, Lockable: true}
	p.down.Store(true)
	lockInProcess(t, f, "a@example.com")
	flapped := make(chan struct{})
	hs.onHold = func(n int64) error {
		switch n {
		case 1: // a lock given to Redis after it takes over
			lockInProcess(t, f, late.ID)
		case 2: // Redis gone before it took it; a lock of the new outage
			p.down.Store(true)
			if _, err := f.AllowAll(context.Background(), owner); err != nil {
				t.Error(err)
			}
			lockInProcess(t, f, y.ID)
			close(flapped)
		}
		return nil
	}
	p.down.Store(false)
	<-flapped
	for _, r := range []ratelimit.Rule{late, y} {
		if d, err := f.AllowAll(t.Context(), r); err != nil || d.Allowed {
			t.Fatalf("%s in the new outage: %+v, %v; want refused", r.ID, d.Results, err)
		}
	}
	p.down.Store(false)
	waitRecovered(t, f)
	for _, r := range []ratelimit.Rule{late, y} {
		if d, err := f.AllowAll(t.Context(), r); err != nil || d.Allowed || !d.Results[0].Locked {
			t.Errorf("%s back on Redis: %+v, %v; want refused as locked", r.ID, d.Results, err)
		}
	}
}

// TestUnlockBeforeTheLogSaysSo: an unlock ends a lock in process, and the
// service marks it ended in the lockout log only after: a failback that
// reads the log in between does not lock the owner again.
func TestUnlockBeforeTheLogSaysSo(t *testing.T) {
	f, _, p, shared := hookedReplica(t)
	lock := ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Until: time.Now().Add(time.Hour), Level: 1}
	if err := shared.Hold(t.Context(), lock); err != nil {
		t.Fatal(err)
	}
	log := newLockLog(lock)
	f.Restore = log.restore
	p.down.Store(true)
	if d, err := f.AllowAll(t.Context(), owner); err != nil || d.Allowed {
		t.Fatalf("during the outage: %+v, %v; want refused", d, err)
	}
	if _, err := f.Clear(t.Context(), owner.Name, owner.ID); err != nil {
		t.Fatal(err)
	}
	p.down.Store(false)
	waitRecovered(t, f)
	log.set() // the log, written after the failback read it
	if d, err := f.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Fatalf("the owner, unlocked during the outage, back on Redis: %+v, %v; want admitted", d.Results, err)
	}
}

// TestLateLocksNotTakenGoBackInProcess: when Redis, once in charge, does
// not take the last locks made in process, the replica goes back to its
// in-process limits, which hold them, and gives them to Redis at the next
// failback; an unlock through another replica after that ends them.
func TestLateLocksNotTakenGoBackInProcess(t *testing.T) {
	rdb, shared := sharedRedis(t, policies)
	pa, pb := &partition{}, &partition{}
	sl := &hookStore{partitioned: partitioned{shared, pa}}
	a := failoverOver(t, sl, newLocal(t), rdb, pa)
	b := replica(t, shared, rdb, pb)
	log := newLockLog()
	a.Restore, b.Restore = log.restore, log.restore
	late := ratelimit.Rule{Name: owner.Name, ID: "late@example.com", Limit: owner.Limit, Lockable: true}
	sl.onHold = func(n int64) error {
		switch n {
		case 1: // made in process while the failback runs
			lockInProcess(t, a, late.ID)
		case 2: // its Hold, once Redis decides: not answered
			return fmt.Errorf("ratelimit: holding locks: %w", context.DeadlineExceeded)
		}
		return nil
	}
	pa.down.Store(true)
	if _, err := a.AllowAll(t.Context(), late); err != nil {
		t.Fatal(err)
	}
	lockInProcess(t, a, "a@example.com") // for the failback's first Hold
	pa.down.Store(false)
	deadline := time.Now().Add(20 * time.Second)
	for sl.holds.Load() < 3 || a.Degraded() {
		if time.Now().After(deadline) {
			t.Fatalf("%d holds, degraded %v: want the late lock given again at a second failback", sl.holds.Load(), a.Degraded())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d, err := a.AllowAll(t.Context(), late); err != nil || d.Allowed {
		t.Fatalf("the late lock once Redis decides: %+v, %v; want refused", d.Results, err)
	}
	if _, err := b.Clear(t.Context(), late.Name, late.ID); err != nil {
		t.Fatal(err)
	}
	pa.down.Store(true) // A's next outage
	if d, err := a.AllowAll(t.Context(), late); err != nil || !d.Allowed {
		t.Fatalf("unlocked through B, in A's next outage: %+v, %v; want admitted", d.Results, err)
	}
}

// TestUnlockNeverWaitsForTheFailback: an unlock (every successful
// sign-in's) while a failback waits on a slow Redis answers within its own
// deadline.
func TestUnlockNeverWaitsForTheFailback(t *testing.T) {
	f, hs, p, _ := hookedReplica(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var slowed atomic.Bool
	hs.clearErr = func(id string) error {
		if id == "x@example.com" && slowed.CompareAndSwap(false, true) {
			close(entered)
			<-release // a Redis that answers slowly
		}
		return nil
	}
	defer close(release)
	p.down.Store(true)
	if _, err := f.AllowAll(t.Context(), owner); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Clear(t.Context(), owner.Name, "x@example.com"); err != nil {
		t.Fatal(err)
	}
	p.down.Store(false)
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := f.Clear(ctx, "login_device", "device-9")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("an unlock waited for the failback past its deadline")
	}
}

// appGroupedPolicies are login_account's lockouts with the identities
// named "app ..." in a group of their own, as an application's accounts
// are.
func appGroupedPolicies() map[string]ratelimit.LockoutPolicy {
	grouped := policy
	grouped.Group = func(id string) string {
		if strings.HasPrefix(id, "app ") {
			return "app"
		}
		return ""
	}
	return map[string]ratelimit.LockoutPolicy{"login_account": grouped}
}

// TestFloodOfAnAppsUnlocksKeepsOthers: during an outage, unlocks of an
// application's accounts, which whoever holds its key names at will, fill
// their own places among those kept for Redis: an unlock of one of
// XCloak's own accounts after them still ends its lock in Redis.
func TestFloodOfAnAppsUnlocksKeepsOthers(t *testing.T) {
	pols := appGroupedPolicies()
	f, p, shared := replicaWith(t, pols)
	if err := shared.Hold(t.Context(), ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Until: time.Now().Add(time.Hour), Level: 1}); err != nil {
		t.Fatal(err)
	}
	p.down.Store(true)
	if _, err := f.AllowAll(t.Context(), owner); err != nil {
		t.Fatal(err)
	}
	for i := range ratelimit.MaxMade + 10 {
		if _, err := f.Clear(t.Context(), owner.Name, fmt.Sprint("app shop acct-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Clear(t.Context(), owner.Name, owner.ID); err != nil {
		t.Fatal(err)
	}
	p.down.Store(false)
	waitRecovered(t, f)
	if d, err := f.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Fatalf("the owner, unlocked after a flood of an application's unlocks: %+v, %v; want admitted", d.Results, err)
	}
}

// TestStaleRestoreIsDropped: an outage's load of the lockouts in force
// that returns after the next outage began, with a list an unlock has
// since made stale, is not held in process.
func TestStaleRestoreIsDropped(t *testing.T) {
	rdb, shared := sharedRedis(t, policies)
	pa, pb := &partition{}, &partition{}
	a, b := replica(t, shared, rdb, pa), replica(t, shared, rdb, pb)
	lock := ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Until: time.Now().Add(time.Hour), Level: 1}
	if err := shared.Hold(t.Context(), lock); err != nil {
		t.Fatal(err)
	}
	log := newLockLog(lock)
	b.Restore = log.restore
	release := make(chan struct{})
	var calls atomic.Int64
	a.Restore = func(ctx context.Context) ([]ratelimit.HeldLock, error) {
		in := *log.in.Load()
		if calls.Add(1) == 1 {
			<-release // a slow Postgres
		}
		return in, nil
	}
	pa.down.Store(true)
	_ = a.Check(t.Context())
	first := ratelimit.Restoring(a)
	pa.down.Store(false)
	waitRecovered(t, a)
	if _, err := b.Clear(t.Context(), owner.Name, owner.ID); err != nil {
		t.Fatal(err)
	}
	log.set()
	pa.down.Store(true)
	_ = a.Check(t.Context())
	if d, err := a.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Fatalf("the next outage, before the first's load returns: %+v, %v; want admitted", d.Results, err)
	}
	close(release)
	<-first // returned, and dropped or held
	if d, err := a.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Fatalf("unlocked through B, once the first outage's load returned: %+v, %v; want admitted", d.Results, err)
	}
}

// TestLockAfterAnUnlock: a lock made in process after an unlock of the
// same account (a successful sign-in's, which every one makes) during an
// outage, or during the failback, holds in Redis after the failback: the
// lock came last.
func TestLockAfterAnUnlock(t *testing.T) {
	t.Run("during the outage", func(t *testing.T) {
		f, _, p, _ := hookedReplica(t)
		p.down.Store(true)
		if _, err := f.Clear(t.Context(), owner.Name, owner.ID); err != nil {
			t.Fatal(err)
		}
		lockInProcess(t, f, owner.ID)
		p.down.Store(false)
		waitRecovered(t, f)
		if d, err := f.AllowAll(t.Context(), owner); err != nil || d.Allowed {
			t.Fatalf("back on Redis: %+v, %v; want refused as locked", d.Results, err)
		}
	})
	t.Run("during the failback", func(t *testing.T) {
		f, hs, p, _ := hookedReplica(t)
		p.down.Store(true)
		lockInProcess(t, f, "someone-else@example.com")
		hs.onHold = func(n int64) error {
			if n == 1 { // the failback's first Hold, Redis not yet in charge
				if _, err := f.Clear(context.Background(), owner.Name, owner.ID); err != nil {
					t.Error(err)
				}
				lockInProcess(t, f, owner.ID)
			}
			return nil
		}
		p.down.Store(false)
		waitRecovered(t, f)
		// The failback gives the lock after Redis took over.
		waitFailbackOver(t, f, hs, 2)
		if d, err := f.AllowAll(t.Context(), owner); err != nil || d.Allowed {
			t.Fatalf("back on Redis: %+v, %v; want refused as locked", d.Results, err)
		}
	})
}

// waitFailbackOver waits, within a generous bound, until the failback has
// made at least holds Holds through hs and is over: every lock and unlock
// made in process given to Redis, the last unlocks ended there too.
func waitFailbackOver(t *testing.T, f *ratelimit.Failover, hs *hookStore, holds int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		made, cleared := ratelimit.Kept(f)
		if hs.holds.Load() >= holds && made == 0 && cleared == 0 && !f.Degraded() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after Redis came back: %d Holds, want %d; %d locks and %d unlocks made in process still kept, degraded %v",
				hs.holds.Load(), holds, made, cleared, f.Degraded())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStaleRestoreLeavesNoLocksMissing: an outage's load of the lockouts
// in force that fails after the next outage began, whose own load
// succeeded, does not leave the next outage refusing lockable decisions.
func TestStaleRestoreLeavesNoLocksMissing(t *testing.T) {
	f, _, p, _ := hookedReplica(t)
	release := make(chan struct{})
	var calls atomic.Int64
	f.Restore = func(ctx context.Context) ([]ratelimit.HeldLock, error) {
		if calls.Add(1) == 1 {
			<-release
			return nil, errors.New("postgres down")
		}
		return nil, nil
	}
	p.down.Store(true)
	_ = f.Check(t.Context())
	first := ratelimit.Restoring(f)
	p.down.Store(false)
	waitRecovered(t, f)
	p.down.Store(true)
	_ = f.Check(t.Context())
	if d, err := f.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Fatalf("the next outage: %+v, %v; want admitted", d.Results, err)
	}
	close(release)
	<-first // failed, and dropped as stale or marked missing
	if d, err := f.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Fatalf("the next outage, after the first's load failed late: %+v, %v; want admitted", d.Results, err)
	}
}
