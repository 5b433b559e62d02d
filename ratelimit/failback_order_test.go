package ratelimit_test

// The order of locks and unlocks across an outage and its failback: an
// unlock made in process while Redis was away ends, once Redis is back,
// only what came before it, and the steps of one request do not let
// another's land between them.

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// lockAt fails id under the rule name through s until it locks, and
// returns the lock as the service records it in the lockout log.
func lockAt(t *testing.T, s ratelimit.Store, name, id string) ratelimit.HeldLock {
	t.Helper()
	for range 1000 {
		fl, err := s.Fail(context.Background(), name, id, "")
		if err != nil {
			t.Fatal(err)
		}
		if fl.LockedNow {
			return ratelimit.HeldLock{Name: name, ID: id, Until: time.Now().Add(fl.LockedFor), Level: fl.Level}
		}
	}
	t.Fatal("never locked")
	return ratelimit.HeldLock{}
}

// An unlock made at replica A while A is cut off (a password reset, or any
// successful second step, which clears mfa_account) reaches Redis at A's
// failback, however long after. A lock the attacker's guesses made later,
// in Redis through replica B (which the lockout log records), stands: the
// unlock ends only what came before it, in Redis and in the log's list.
func TestOutageUnlockEndsOnlyEarlierLocks(t *testing.T) {
	a, b, pa, log := twoReplicasOneLog(t)

	pa.down.Store(true)
	if _, err := a.Clear(t.Context(), owner.Name, owner.ID); err != nil { // at t1, through A
		t.Fatal(err)
	}
	if !a.Degraded() {
		t.Fatal("A not degraded")
	}
	lock := lockAt(t, b, owner.Name, owner.ID) // at t2 > t1, through B, in Redis
	log.set(lock)                              // the service records it
	if d, err := b.AllowAll(t.Context(), owner); err != nil || d.Allowed {
		t.Fatalf("through B after the lock: %+v, %v; want refused", d.Results, err)
	}
	pa.down.Store(false) // t3: A's partition heals
	waitRecovered(t, a)
	if d, err := b.AllowAll(t.Context(), owner); err != nil || d.Allowed || !d.Results[0].Locked {
		t.Fatalf("lock made in Redis at t2, after A's failback replayed A's unlock of t1: %+v, %v; want refused as locked", d.Results, err)
	}
}

// So does an administrator's lock made through B after A's unlock: longer
// than its level's, it is known to have come later only by the start it
// carries, in Redis and in the log.
func TestOutageUnlockEndsNoLaterAdminLock(t *testing.T) {
	a, b, pa, log := twoReplicasOneLog(t)

	pa.down.Store(true)
	if _, err := a.Clear(t.Context(), owner.Name, owner.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	lock := ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Since: time.Now(), Until: time.Now().Add(24 * time.Hour), Level: 1}
	if err := b.Hold(t.Context(), lock); err != nil {
		t.Fatal(err)
	}
	log.set(lock)
	pa.down.Store(false)
	waitRecovered(t, a)
	for name, r := range map[string]*ratelimit.Failover{"A": a, "B": b} {
		if d, err := r.AllowAll(t.Context(), owner); err != nil || d.Allowed || !d.Results[0].Locked {
			t.Fatalf("through %s, the administrator's lock made after A's unlock: %+v, %v; want refused as locked", name, d.Results, err)
		}
	}
}

// A lock whose start, given by a clock running ahead, is still to come is
// no later than an unlock made after it was held: A's failback, whose log
// still lists it, does not hold it again over that unlock.
func TestOutageUnlockEndsALockStartedAhead(t *testing.T) {
	a, b, pa, log := twoReplicasOneLog(t)
	lock := ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Since: time.Now().Add(10 * time.Minute),
		Until: time.Now().Add(2 * time.Hour), Level: 1}
	if err := b.Hold(t.Context(), lock); err != nil {
		t.Fatal(err)
	}
	log.set(lock) // the log's record lags the unlock below
	time.Sleep(5 * time.Millisecond)
	pa.down.Store(true)
	if _, err := a.Clear(t.Context(), owner.Name, owner.ID); err != nil {
		t.Fatal(err)
	}
	pa.down.Store(false)
	waitRecovered(t, a)
	if d, err := b.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Fatalf("the unlock made after the lock was held, after A's failback: %+v, %v; want admitted", d.Results, err)
	}
}

// twoReplicasOneLog is replicas A and B of one Redis store, each cut off
// by its own partition (A's returned), sharing one lockout log.
func twoReplicasOneLog(t *testing.T) (a, b *ratelimit.Failover, pa *partition, log *lockLog) {
	t.Helper()
	rdb, shared := sharedRedis(t, policies)
	pa = &partition{}
	a, b = replica(t, shared, rdb, pa), replica(t, shared, rdb, &partition{})
	log = newLockLog()
	a.Restore, b.Restore = log.restore, log.restore
	return a, b, pa, log
}

// hookedLocal is an in-process store whose Clear and Fail run a hook
// right after the store itself changed, before the Failover notes it:
// another request's step landing in between.
type hookedLocal struct {
	*ratelimit.Local
	afterClear func(id string)
	afterFail  func(id string, fl ratelimit.Failure)
}

func (h *hookedLocal) Clear(ctx context.Context, name, id string) (bool, error) {
	was, err := h.Local.Clear(ctx, name, id)
	if h.afterClear != nil {
		h.afterClear(id)
	}
	return was, err
}

func (h *hookedLocal) Fail(ctx context.Context, name, id, attempt string) (ratelimit.Failure, error) {
	fl, err := h.Local.Fail(ctx, name, id, attempt)
	if h.afterFail != nil {
		h.afterFail(id, fl)
	}
	return fl, err
}

// inBetween runs step in another goroutine and waits for it a little:
// long enough to land between two steps of the caller that do not hold
// it off, not for ever for one that does. The caller waits for it to end
// on done.
func inBetween(step func()) (done chan struct{}) {
	done = make(chan struct{})
	go func() { defer close(done); step() }()
	select {
	case <-done:
	case <-time.After(200 * time.Millisecond):
	}
	return done
}

func hookedLocalReplica(t *testing.T) (*ratelimit.Failover, *hookedLocal, *partition, *lockLog) {
	t.Helper()
	rdb, shared := sharedRedis(t, policies)
	p := &partition{}
	hl := &hookedLocal{Local: newLocal(t)}
	f := failoverOver(t, partitioned{shared, p}, hl, rdb, p)
	log := newLockLog()
	f.Restore = log.restore
	return f, hl, p, log
}

// A lock that guesses make while an unlock is under way in process comes
// after the unlock: it holds in process, and in Redis once it is back.
func TestLockMadeDuringAnUnlockStays(t *testing.T) {
	f, hl, p, log := hookedLocalReplica(t)
	var once atomic.Bool
	guessed := make(chan chan struct{}, 1)
	hl.afterClear = func(id string) {
		if id == owner.ID && once.CompareAndSwap(false, true) {
			// The guesses land here, unless they wait for the unlock.
			guessed <- inBetween(func() { log.set(lockAt(t, f, owner.Name, owner.ID)) })
		}
	}
	p.down.Store(true)
	if _, err := f.Clear(t.Context(), owner.Name, owner.ID); err != nil {
		t.Fatal(err)
	}
	<-<-guessed
	if d, err := f.AllowAll(t.Context(), owner); err != nil || d.Allowed {
		t.Fatalf("in process, the lock made after the unlock: %+v, %v; want refused", d.Results, err)
	}
	p.down.Store(false)
	waitRecovered(t, f)
	if d, err := f.AllowAll(t.Context(), owner); err != nil || d.Allowed || !d.Results[0].Locked {
		t.Fatalf("back on Redis, the lock made after the unlock: %+v, %v; want refused as locked", d.Results, err)
	}
}

// An unlock that comes while a failure is locking in process comes after
// the lock: the failback gives Redis no lock the unlock ended.
func TestUnlockDuringAFailureStays(t *testing.T) {
	f, hl, p, _ := hookedLocalReplica(t)
	unlocked := make(chan chan struct{}, 1)
	hl.afterFail = func(id string, fl ratelimit.Failure) {
		if id == owner.ID && fl.LockedNow {
			// The owner's unlock lands before Fail notes the lock, unless
			// it waits for the failure.
			unlocked <- inBetween(func() {
				if _, err := f.Clear(context.Background(), owner.Name, owner.ID); err != nil {
					t.Error(err)
				}
			})
		}
	}
	p.down.Store(true)
	lockAt(t, f, owner.Name, owner.ID)
	<-<-unlocked
	if d, err := f.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Fatalf("in process, after the unlock: %+v, %v; want admitted", d.Results, err)
	}
	p.down.Store(false)
	waitRecovered(t, f)
	if d, err := f.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Fatalf("back on Redis, the unlock came last: %+v, %v; want admitted", d.Results, err)
	}
}

// Whoever can cut one replica off from Redis at will, again and again,
// does not get a fresh count of failures each time: one less than the
// threshold per outage still locks the account in the end.
func TestOutagesKeepTheFailures(t *testing.T) {
	f, _, p, _ := hookedReplica(t) // threshold 10
	failures := 0
	for outage := range 3 {
		p.down.Store(true)
		_ = f.Check(t.Context())
		if !f.Degraded() {
			t.Fatal("not degraded")
		}
		for i := range policy.Threshold - 1 {
			fl, err := f.Fail(t.Context(), owner.Name, owner.ID, fmt.Sprint("guess-", outage, "-", i))
			if err != nil {
				t.Fatal(err)
			}
			failures++
			if fl.LockedNow || fl.Failures == 0 {
				return // locked: what a continuous outage does at the 10th
			}
		}
		p.down.Store(false)
		waitRecovered(t, f)
	}
	d, err := f.AllowAll(t.Context(), owner)
	if err != nil || d.Allowed {
		t.Fatalf("%d distinct wrong passwords within minutes (threshold %d), over 3 short outages: never locked, %+v", failures, policy.Threshold, d.Results)
	}
}

// An identity cleared again and again during an outage (every sign-in from
// a known device clears login_device, every second step mfa_account) takes
// one place among the unlocks kept for Redis, not every other identity's:
// a device unlocked after 20,000 such sign-ins is unlocked in Redis too.
func TestRepeatedUnlocksTakeOnePlace(t *testing.T) {
	f, p, shared := replicaWith(t, policies)
	victim := ratelimit.Rule{Name: "login_device", ID: "victim-device", Limit: ratelimit.PerMinute(100), Lockable: true}
	if err := shared.Hold(t.Context(), ratelimit.HeldLock{Name: victim.Name, ID: victim.ID, Until: time.Now().Add(policy.LockFor(1)), Level: 1}); err != nil {
		t.Fatal(err)
	}
	p.down.Store(true)
	_ = f.Check(t.Context())
	for range ratelimit.MaxMade {
		if _, err := f.Clear(t.Context(), "login_device", "busy-device"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Clear(t.Context(), victim.Name, victim.ID); err != nil {
		t.Fatal(err)
	}
	p.down.Store(false)
	waitRecovered(t, f)
	if d, err := f.AllowAll(t.Context(), victim); err != nil || !d.Allowed {
		t.Fatalf("a device unlocked during the outage, after one device's repeated sign-ins: %+v, %v; want admitted", d.Results, err)
	}
}

// An unlock made while the failback hands the limits back is given to Redis
// again after the failback's last Hold; a lock Redis made after the unlock
// (through another replica, once Redis decides again) stands.
func TestUnlockDuringFailbackEndsOnlyEarlierLocks(t *testing.T) {
	f, hs, p, shared := hookedReplica(t)
	p.down.Store(true)
	lockInProcess(t, f, "a@example.com") // for the first Hold
	hs.onHold = func(n int64) error {
		switch n {
		case 1: // handing over, Redis not yet in charge
			lockInProcess(t, f, "late@example.com") // so there is a late Hold
			if _, err := f.Clear(context.Background(), owner.Name, owner.ID); err != nil {
				t.Error(err)
			}
		case 2: // Redis decides: another replica's guesses lock the owner there
			lockAt(t, shared, owner.Name, owner.ID)
		}
		return nil
	}
	p.down.Store(false)
	waitFailbackOver(t, f, hs, 2) // its late Hold and its last unlocks
	if d, err := f.AllowAll(t.Context(), owner); err != nil || d.Allowed || !d.Results[0].Locked {
		t.Fatalf("a lock Redis made after the unlock: %+v, %v; want refused as locked", d.Results, err)
	}
}

// An unlock that arrives while the failback gives Redis the outage's
// unlocks, before its first Hold, stays.
func TestUnlockWhileFailbackEndsUnlocks(t *testing.T) {
	f, hs, p, _ := hookedReplica(t)
	p.down.Store(true)
	lockInProcess(t, f, owner.ID)
	if _, err := f.Clear(t.Context(), owner.Name, "x@example.com"); err != nil {
		t.Fatal(err)
	}
	var once atomic.Bool
	hs.clearErr = func(id string) error {
		if id == "x@example.com" && once.CompareAndSwap(false, true) {
			if _, err := f.Clear(context.Background(), owner.Name, owner.ID); err != nil {
				t.Error(err)
			}
		}
		return nil
	}
	p.down.Store(false)
	waitRecovered(t, f)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d, err := f.AllowAll(t.Context(), owner)
		if err == nil && d.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("unlocked while the failback ended the outage's unlocks: %+v, %v; want admitted", d.Results, err)
		}
	}
}

// A lock made at replica A while A is cut off, which the lockout log
// records, is ended through replica B, on Redis (an administrator's unlock
// or a password reset, which end the log's record too): A's failback does
// not give it to Redis after the unlock.
func TestUnlockElsewhereOutlivesTheFailback(t *testing.T) {
	a, b, pa, log := twoReplicasOneLog(t)
	a.SetLogged(owner.Name)
	b.SetLogged(owner.Name)

	pa.down.Store(true)
	lock := lockAt(t, a, owner.Name, owner.ID) // guesses at A, in process
	log.set(lock)
	// Longer ago than the log takes to have it; later, the unlock through B.
	ratelimit.AgeMade(a, time.Minute)
	if _, err := b.Clear(t.Context(), owner.Name, owner.ID); err != nil {
		t.Fatal(err)
	}
	log.set() // the unlock ends the record too
	pa.down.Store(false)
	waitRecovered(t, a)
	if d, err := b.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Fatalf("after A's failback, the unlock through B came last: %+v, %v; want admitted", d.Results, err)
	}
}

// A lock made at a cut-off replica too recently for the lockout log to
// have it yet is given to Redis at the failback all the same.
func TestRecentLockNotYetLoggedIsGiven(t *testing.T) {
	f, p, _ := replicaWith(t, policies)
	f.SetLogged(owner.Name)
	p.down.Store(true)
	lockAt(t, f, owner.Name, owner.ID) // the log does not list it yet
	p.down.Store(false)
	waitRecovered(t, f)
	if d, err := f.AllowAll(t.Context(), owner); err != nil || d.Allowed || !d.Results[0].Locked {
		t.Fatalf("a lock made just before the failback: %+v, %v; want refused as locked", d.Results, err)
	}
}

// An unlock made while the failback hands the limits back, before Redis
// decides, ends in Redis the lock the failback gives it from before the
// unlock, though guesses lock the account again in process after it: the
// new lock is given to Redis, the one the unlock ended is not held again.
// An administrator's lock of a day, ended, followed by a lock of half an
// hour, leaves the owner locked for half an hour, not a day.
func TestUnlockDuringFailbackThenALockEndsTheEarlierLock(t *testing.T) {
	f, hs, p, shared := hookedReplica(t)
	lockedForADayInOutage(t, f, p)
	hs.onHold = func(n int64) error {
		if n == 1 { // handing over, Redis not yet in charge
			if _, err := f.Clear(context.Background(), owner.Name, owner.ID); err != nil {
				t.Error(err)
			}
			time.Sleep(2 * time.Millisecond) // the new lock begins after the unlock
			lockInProcess(t, f, owner.ID)
		}
		return nil
	}
	p.down.Store(false)
	waitFailbackOver(t, f, hs, 2) // its late Hold and its last unlocks
	lockedOnlyByTheLaterLock(t, shared)
}

// So does an unlock made as the failback gives Redis its last locks, in
// an outage that begins then (Redis lost again for the unlock's call), and
// guesses that lock the account again in process: the unlock ends the
// administrator's lock at once, the new lock reaches Redis at the next
// failback.
func TestUnlockAsRedisIsLostAgainThenALockEndsTheEarlierLock(t *testing.T) {
	f, hs, p, shared := hookedReplica(t)
	lockedForADayInOutage(t, f, p)
	hs.onHold = func(n int64) error {
		switch n {
		case 1: // handing over, Redis not yet in charge
			lockInProcess(t, f, "late@example.com") // so there is a late Hold
		case 2: // Redis decides, and is lost for the unlock's call
			p.down.Store(true)
			if _, err := f.Clear(context.Background(), owner.Name, owner.ID); err != nil {
				t.Error(err)
			}
			if !f.Degraded() {
				t.Error("not degraded after the unlock's call failed")
			}
			time.Sleep(2 * time.Millisecond) // the new lock begins after the unlock
			lockInProcess(t, f, owner.ID)
			p.down.Store(false)
		}
		return nil
	}
	p.down.Store(false)
	waitFailbackOver(t, f, hs, 3) // the next failback's Hold of the new lock
	lockedOnlyByTheLaterLock(t, shared)
}

// lockedForADayInOutage cuts f off from Redis and has an administrator
// lock the owner for a day, in process.
func lockedForADayInOutage(t *testing.T, f *ratelimit.Failover, p *partition) {
	t.Helper()
	p.down.Store(true)
	_ = f.Check(t.Context())
	adminLock := ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Since: time.Now(), Until: time.Now().Add(24 * time.Hour), Level: 1}
	if err := f.Hold(t.Context(), adminLock); err != nil {
		t.Fatal(err)
	}
}

// lockedOnlyByTheLaterLock checks that Redis holds the owner locked by
// the lock made after the unlock, no longer: not by the day's lock the
// unlock ended.
func lockedOnlyByTheLaterLock(t *testing.T, shared *ratelimit.RedisStore) {
	t.Helper()
	d, err := shared.AllowAll(t.Context(), owner)
	if err != nil || d.Allowed || !d.Results[0].Locked {
		t.Fatalf("in Redis, the lock made after the unlock: %+v, %v; want refused as locked", d.Results, err)
	}
	if longest := policy.LockFor(2); d.RetryAfter > longest {
		t.Fatalf("in Redis, the owner is locked for %v, more than the %v of the lock made after the unlock: the administrator's lock it ended is held again", d.RetryAfter, longest)
	}
}
