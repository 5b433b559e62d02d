package ratelimit_test

// The edges of the failback: locks held at a level below the identity's,
// an administrator's lock given during an outage, a Redis endpoint that
// answers from several servers, and a long lockout log.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/ratelimit"
)

// A lock held in Redis at a level below the identity's (a replica that
// locked in process never saw Redis' level) keeps its own level in its
// key, so that when it began is known: an unlock made in another
// replica's process before it, given to Redis at that replica's failback,
// does not end it.
func TestHeldLockBelowTheLevelOutlivesAnEarlierUnlock(t *testing.T) {
	rdb, shared := sharedRedis(t, policies)
	dev := ratelimit.Rule{Name: "login_device", ID: "r3-device", Limit: ratelimit.PerMinute(100), Lockable: true}
	// Redis' level: 3, from three locks earlier on (each ended).
	for range 3 {
		lockAt(t, shared, dev.Name, dev.ID)
		if _, err := shared.Clear(t.Context(), dev.Name, dev.ID); err != nil {
			t.Fatal(err)
		}
	}
	pa, pb := &partition{}, &partition{}
	a, b := replica(t, shared, rdb, pa), replica(t, shared, rdb, pb)
	a.Restore, b.Restore = newLockLog().restore, newLockLog().restore
	pa.down.Store(true)
	pb.down.Store(true)
	if _, err := a.Clear(t.Context(), dev.Name, dev.ID); err != nil { // t1
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	lockAt(t, b, dev.Name, dev.ID) // t2 > t1, in B's process, level 1
	pb.down.Store(false)
	waitRecovered(t, b)
	if d, _ := b.AllowAll(t.Context(), dev); d.Allowed {
		t.Fatal("B's lock not in Redis after B's failback")
	}
	pa.down.Store(false)
	waitRecovered(t, a)
	if d, err := b.AllowAll(t.Context(), dev); err != nil || d.Allowed {
		t.Fatalf("a lock made at t2 after A's unlock of t1 was ended by A's failback: %+v, %v; want refused as locked", d.Results, err)
	}
}

// An administrator's lock given during an outage, longer than its level's,
// has no start to tell whether the lockout log should list it yet: the
// failback gives it to Redis whether or not the log does.
func TestAdminLockDuringAnOutageIsGiven(t *testing.T) {
	f, p, _ := replicaWith(t, policies)
	f.SetLogged(owner.Name)
	p.down.Store(true)
	_ = f.Check(t.Context())
	if !f.Degraded() {
		t.Fatal("not degraded")
	}
	// LockUser's Hold; its RecordLockout comes next, after the failback read the log.
	if err := f.Hold(t.Context(), ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Until: time.Now().Add(2 * time.Hour), Level: 1}); err != nil {
		t.Fatal(err)
	}
	p.down.Store(false)
	waitRecovered(t, f)
	if d, err := f.AllowAll(t.Context(), owner); err != nil || d.Allowed {
		t.Fatalf("an administrator's lock given a moment before the failback: %+v, %v; want refused as locked", d.Results, err)
	}
}

// fakeINFO answers PING, and INFO server from one of several long-lived
// servers in turn, as a balancer over several does.
type fakeINFO struct {
	n   atomic.Int64
	ids []string
}

func (f *fakeINFO) Ping(ctx context.Context) *redis.StatusCmd {
	cmd := redis.NewStatusCmd(ctx)
	cmd.SetVal("PONG")
	return cmd
}

func (f *fakeINFO) Info(ctx context.Context, _ ...string) *redis.StringCmd {
	cmd := redis.NewStringCmd(ctx)
	id := f.ids[int(f.n.Add(1))%len(f.ids)]
	cmd.SetVal("# Server\r\nredis_version:7.2.4\r\nrun_id:" + id + "\r\nuptime_in_seconds:864000\r\n")
	return cmd
}

// An endpoint that answers INFO from several long-lived servers in turn
// (a balancer over several) shows new run_ids, but no process started
// since the last look: no restart, no trip.
func TestLongLivedServersInTurnAreNoRestart(t *testing.T) {
	_, shared := sharedRedis(t, policies)
	pinger := &fakeINFO{ids: []string{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}}
	f := ratelimit.NewFailover(shared, newLocal(t), pinger, ratelimit.FailOpen, nil)
	t.Cleanup(f.Close)
	var trips atomic.Int64
	f.OnChange = func(degraded bool) {
		if degraded {
			trips.Add(1)
		}
	}
	f.WatchRestarts(20 * time.Millisecond)
	time.Sleep(time.Second)
	if n := trips.Load(); n > 0 {
		t.Fatalf("two servers up for 10 days answering INFO in turn: %d trips into degraded mode (FailOpen: no limits each time) in 1s; want none", n)
	}
}

// A failback over a long lockout log and many locks made in process does
// its sorting outside the lock that every failure decided in process
// takes: a wrong password meanwhile waits microseconds, not the scan.
func TestFailbackDoesNotStallFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	f, p, _ := replicaWith(t, policies)
	f.SetLogged(owner.Name)
	listed := make([]ratelimit.HeldLock, ratelimit.DefaultLocalIdentities-1)
	until := time.Now().Add(time.Hour)
	for i := range listed {
		listed[i] = ratelimit.HeldLock{Name: owner.Name, ID: fmt.Sprint("listed-", i, "@example.com"), Until: until, Level: 1}
	}
	var healed atomic.Bool
	var once sync.Once
	started := make(chan struct{})
	f.Restore = func(context.Context) ([]ratelimit.HeldLock, error) {
		if healed.Load() {
			once.Do(func() { close(started) })
		}
		return listed, nil
	}
	p.down.Store(true)
	_ = f.Check(t.Context())
	for i := range ratelimit.MaxMade {
		lockInProcess(t, f, fmt.Sprint("made-", i, "@example.com"))
	}
	ratelimit.AgeMade(f, time.Minute)
	healed.Store(true)
	p.down.Store(false)
	<-started
	// Wrong passwords on other accounts while the failback runs: the
	// longest wait.
	var waited time.Duration
	t0 := time.Now()
	for i := 0; i < 30 && f.Degraded(); i++ {
		time.Sleep(100 * time.Millisecond)
		t1 := time.Now()
		if _, err := f.Fail(t.Context(), owner.Name, fmt.Sprint("bystander-", i, "@example.com"), "x"); err != nil {
			t.Fatal(err)
		}
		waited = max(waited, time.Since(t1))
	}
	for deadline := time.Now().Add(3 * time.Minute); f.Degraded(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("still degraded")
		}
	}
	t.Logf("longest wait %v; failback done %v after the Restore", waited, time.Since(t0))
	if waited > 500*time.Millisecond {
		t.Fatalf("one wrong password during the failback waited %v for madeMu (failback scan of %d made x %d listed)", waited, ratelimit.MaxMade, len(listed))
	}
}
