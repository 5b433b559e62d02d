package ratelimit_test

// The edges of the failback: locks held at a level below the identity's,
// an administrator's lock given during an outage, a Redis endpoint that
// answers from several servers, and a long lockout log.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
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
	trips, _ := countChanges(f)
	f.WatchRestarts(20 * time.Millisecond)
	// Fifty looks, however long a loaded machine takes to make them.
	for deadline := time.Now().Add(30 * time.Second); pinger.n.Load() < 50; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d looks of the watch after 30 s, want 50", pinger.n.Load())
		}
	}
	if n := trips.Load(); n > 0 {
		t.Fatalf("two servers up for 10 days answering INFO in turn: %d trips into degraded mode (FailOpen: no limits each time) in %d looks; want none", n, pinger.n.Load())
	}
}

// A failback does its scans of the lockout log and of the locks made in
// process outside the lock that every failure decided in process takes:
// over a long log and many locks, a wrong password meanwhile is decided
// then, not after the scans.
func TestFailbackDoesNotStallFailures(t *testing.T) {
	f, p, _ := replicaWith(t, policies)
	f.SetLogged(owner.Name)
	listed := make([]ratelimit.HeldLock, 10)
	until := time.Now().Add(time.Hour)
	for i := range listed {
		listed[i] = ratelimit.HeldLock{Name: owner.Name, ID: fmt.Sprint("listed-", i, "@example.com"), Until: until, Level: 1}
	}
	f.Restore = func(context.Context) ([]ratelimit.HeldLock, error) { return listed, nil }
	p.down.Store(true)
	_ = f.Check(t.Context())
	for i := range 10 {
		lockInProcess(t, f, fmt.Sprint("made-", i, "@example.com"))
	}
	ratelimit.AgeMade(f, time.Minute)
	// A wrong password on another account while the failback scans. Had
	// the scans the lock, it would wait for them to end, and so for ever
	// here; the bound is for that case alone.
	var once sync.Once
	scanned := make(chan error, 1)
	ratelimit.WhileScanning(f, func() {
		once.Do(func() {
			decided := make(chan error, 1)
			go func() {
				_, err := f.Fail(context.Background(), owner.Name, "bystander@example.com", "x")
				decided <- err
			}()
			select {
			case err := <-decided:
				scanned <- err
			case <-time.After(time.Minute):
				scanned <- errors.New("a wrong password during the failback's scans waited for them")
			}
		})
	})
	p.down.Store(false)
	if err := <-scanned; err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Minute); f.Degraded(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("still degraded")
		}
	}
}

// serverINFO is one Redis endpoint as the watch sees it: PING through a
// partition, INFO server and replication from the process now answering.
type serverINFO struct {
	p               *partition
	looks           infoCounter // INFOs answered
	mu              sync.Mutex
	id              string
	start           time.Time // when the process answering started
	replid, replid2 string
}

func (s *serverINFO) set(id string, start time.Time, replid, replid2 string) {
	s.mu.Lock()
	s.id, s.start, s.replid, s.replid2 = id, start, replid, replid2
	s.mu.Unlock()
}

func (s *serverINFO) Ping(ctx context.Context) *redis.StatusCmd {
	cmd := redis.NewStatusCmd(ctx)
	if s.p.down.Load() {
		cmd.SetErr(errPartitioned)
	} else {
		cmd.SetVal("PONG")
	}
	return cmd
}

func (s *serverINFO) Info(ctx context.Context, _ ...string) *redis.StringCmd {
	cmd := redis.NewStringCmd(ctx)
	if s.p.down.Load() {
		cmd.SetErr(errPartitioned)
		return cmd
	}
	s.mu.Lock()
	id, up, replid, replid2 := s.id, int(time.Since(s.start)/time.Second), s.replid, s.replid2
	s.mu.Unlock()
	cmd.SetVal(fmt.Sprintf("# Server\r\nredis_version:7.2.4\r\nrun_id:%s\r\nuptime_in_seconds:%d\r\n\r\n# Replication\r\nrole:master\r\nmaster_replid:%s\r\nmaster_replid2:%s\r\n",
		id, up, replid, replid2))
	s.looks.n.Add(1)
	return cmd
}

func watched(t *testing.T, s *serverINFO) (*ratelimit.Failover, *atomic.Int64) {
	t.Helper()
	_, shared := sharedRedis(t, policies)
	f := ratelimit.NewFailover(partitioned{shared, s.p}, newLocal(t), s, ratelimit.FailOpen, nil)
	t.Cleanup(f.Close)
	trips, _ := countChanges(f)
	return f, trips
}

// countChanges counts f's trips into degraded mode and its failbacks.
func countChanges(f *ratelimit.Failover) (trips, backs *atomic.Int64) {
	trips, backs = new(atomic.Int64), new(atomic.Int64)
	f.OnChange = func(degraded bool) {
		if degraded {
			trips.Add(1)
		} else {
			backs.Add(1)
		}
	}
	return trips, backs
}

// A Redis that restarts during an outage (calls fail, the replica is
// degraded) is given the locks by the failback; the watch does not take
// the same new process for a second restart at its first look after.
func TestNoSecondTripAfterAnOutageWithARestart(t *testing.T) {
	s := &serverINFO{p: &partition{}}
	s.set("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", time.Now().Add(-240*time.Hour), "r1", "0000000000000000000000000000000000000000")
	f, trips := watched(t, s)
	f.WatchRestarts(20 * time.Millisecond)
	s.looks.wait(t, 2) // the watch knows A
	s.p.down.Store(true)
	_ = f.Check(t.Context())
	if !f.Degraded() {
		t.Fatal("not degraded")
	}
	time.Sleep(300 * time.Millisecond)
	s.set("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", time.Now(), "r2", "0000000000000000000000000000000000000000") // restarted while down
	s.p.down.Store(false)
	waitRecovered(t, f) // the failback gave B the locks
	// Looks at B after the failback, however slowly a loaded machine
	// makes them: the third begins only once the second has been judged.
	s.looks.wait(t, s.looks.n.Load()+3)
	if n := trips.Load(); n != 1 {
		t.Fatalf("one outage (Redis restarted within it, failback done): %d trips into degraded mode; want 1", n)
	}
}

// An outage shorter than the watch's interval, with Redis restarted
// within it, falls between two looks: the failback gives the new process
// the locks, and the watch's next look takes it for the server to know,
// not for a second restart (FailOpen: a second moment without limits).
// A restart after that, with no call failing, is still one. On the
// bubble's clock: the watch looks at 1 s, 2 s, 3 s and on; the outage
// lasts from 2.5 s to the probe's first ping, at 2.75 s.
func TestNoSecondTripAfterAnOutageShorterThanTheWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &serverINFO{p: &partition{}}
		s.set("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", time.Now().Add(-240*time.Hour), "r1", "0000000000000000000000000000000000000000")
		// The shared store in process too: nothing leaves the bubble.
		f := ratelimit.NewFailover(partitioned{newLocal(t), s.p}, newLocal(t), s, ratelimit.FailOpen, nil)
		t.Cleanup(f.Close)
		trips, backs := countChanges(f)
		downAfterTwoLooks(t, s, f)
		s.set("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", time.Now(), "r2", "0000000000000000000000000000000000000000") // restarted while down
		s.p.down.Store(false)
		// The failback at 2.75 s, the looks at 3, 4 and 5 s.
		time.Sleep(3 * time.Second)
		if n := trips.Load(); n != 1 {
			t.Fatalf("one outage shorter than the watch's interval (Redis restarted within it, failback done): %d trips into degraded mode in %d looks; want 1", n, s.looks.n.Load())
		}
		if f.Degraded() || backs.Load() != 1 {
			t.Fatalf("at 5.5 s: degraded %v, %d failbacks; want back, after 1", f.Degraded(), backs.Load())
		}
		// Redis restarts between two calls: no call fails, the watch's
		// look at 6 s finds the new process.
		s.set("cccccccccccccccccccccccccccccccccccccccc", time.Now(), "r3", "0000000000000000000000000000000000000000")
		time.Sleep(time.Second) // the look at 6 s, the failback at 6.25 s
		if n, b := trips.Load(), backs.Load(); n != 2 || b != 2 || f.Degraded() {
			t.Fatalf("a restart between two calls after the outage: %d trips, %d failbacks, degraded %v; want 2, 2, false", n, b, f.Degraded())
		}
	})
}

// downAfterTwoLooks starts f's watch of restarts, a look a second, and at
// 2.5 s on the bubble's clock, after its looks at 1 and 2 s, takes s down
// and has f find it so: an outage begins.
func downAfterTwoLooks(t *testing.T, s *serverINFO, f *ratelimit.Failover) {
	t.Helper()
	f.WatchRestarts(time.Second)
	time.Sleep(2500 * time.Millisecond)
	if n := s.looks.n.Load(); n != 2 {
		t.Fatalf("%d looks at 2.5 s, want 2", n)
	}
	s.p.down.Store(true)
	_ = f.Check(t.Context())
	if !f.Degraded() {
		t.Fatal("not degraded")
	}
}

// A Redis that restarts again after an outage's failback, before the
// watch has seen the server that failback gave the locks to, lost them:
// the first server seen after the outage is taken for the one to know
// only if it is the one the failback found answering. On the bubble's
// clock: the watch looks at 1 s, 2 s, 3 s and on; an outage from 2.5 s,
// Redis restarted within it, ends with the failback at 2.75 s; Redis
// stops again at 2.8 s and is back, empty, at 3.5 s (the look at 3 s gets
// no answer; at 4 s the uptime, 0 s, says it started after 2.75 s) or at
// 2.9 s (at 3 s the uptime, 0 s, cannot say whether it started before
// the failback or after; the failback's own look at its server can).
func TestRestartAfterAFailbackBeforeTheWatchLooks(t *testing.T) {
	for _, c := range []struct {
		name string
		down time.Duration // from 2.8 s
	}{{"the look finds it down", 700 * time.Millisecond}, {"within a second of the failback", 100 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { restartAfterAFailback(t, c.down) })
		})
	}
}

func restartAfterAFailback(t *testing.T, down time.Duration) {
	s := &serverINFO{p: &partition{}}
	s.set("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", time.Now().Add(-240*time.Hour), "r1", "0000000000000000000000000000000000000000")
	// The shared store in process too: nothing leaves the bubble.
	shared := newLocal(t)
	f := ratelimit.NewFailover(partitioned{shared, s.p}, newLocal(t), s, ratelimit.FailOpen, nil)
	t.Cleanup(f.Close)
	f.Restore = newLockLog(lockAt(t, shared, owner.Name, owner.ID)).restore
	lost := func() { // a restart without persistence
		if _, err := shared.Clear(t.Context(), owner.Name, owner.ID); err != nil {
			t.Fatal(err)
		}
	}
	locked := func() bool {
		d, err := shared.AllowAll(t.Context(), owner)
		return err == nil && !d.Allowed
	}
	trips, backs := countChanges(f)
	downAfterTwoLooks(t, s, f)
	lost()
	s.set("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", time.Now(), "r2", "0000000000000000000000000000000000000000") // restarted while down
	s.p.down.Store(false)
	time.Sleep(300 * time.Millisecond) // the failback at 2.75 s
	if f.Degraded() || backs.Load() != 1 || !locked() {
		t.Fatalf("at 2.8 s: degraded %v, %d failbacks, owner locked in redis %v; want back, after 1, locked", f.Degraded(), backs.Load(), locked())
	}
	// Redis restarts again, between two calls, and comes back empty.
	s.p.down.Store(true)
	lost()
	time.Sleep(down)
	s.set("cccccccccccccccccccccccccccccccccccccccc", time.Now(), "r3", "0000000000000000000000000000000000000000")
	s.p.down.Store(false)
	time.Sleep(time.Second) // the next look that finds it, and its failback a quarter of a second later
	if n, b := trips.Load(), backs.Load(); n != 2 || b != 2 || f.Degraded() {
		t.Fatalf("a restart after the failback, before the watch's next look: %d trips, %d failbacks, degraded %v; want 2, 2, false", n, b, f.Degraded())
	}
	if !locked() {
		t.Fatal("the lockout in force is not back in the redis restarted after the failback")
	}
}

// outageInLook is a serverINFO whose look number at finds an outage
// begun after it asked: calls fail, Redis restarts, and the failback is
// done before the new process answers that look.
type outageInLook struct {
	*serverINFO
	f  *ratelimit.Failover
	at int64
	n  atomic.Int64
}

func (o *outageInLook) Info(ctx context.Context, section ...string) *redis.StringCmd {
	if o.n.Add(1) == o.at {
		o.p.down.Store(true)
		_ = o.f.Check(ctx)
		o.set("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", time.Now(), "r2", "0000000000000000000000000000000000000000")
		o.p.down.Store(false)
		time.Sleep(500 * time.Millisecond) // the failback, at the probe's first ping
	}
	return o.serverINFO.Info(ctx, section...)
}

// An outage that begins and ends while the watch waits for INFO's
// answer, Redis restarted within it, leaves the watch not knowing
// whether that answer came before the failback or after: it takes the
// server of its next look for the one to know, as after any outage.
func TestNoSecondTripAfterAnOutageWithinALook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &outageInLook{serverINFO: &serverINFO{p: &partition{}}, at: 3}
		o.set("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", time.Now().Add(-240*time.Hour), "r1", "0000000000000000000000000000000000000000")
		o.f = ratelimit.NewFailover(partitioned{newLocal(t), o.p}, newLocal(t), o, ratelimit.FailOpen, nil)
		t.Cleanup(o.f.Close)
		trips, _ := countChanges(o.f)
		o.f.WatchRestarts(time.Second)
		// Looks at 1 and 2 s know A; the one at 3 s is answered by B
		// at 3.5 s, after the failback at 3.25 s; then 4 and 5 s.
		time.Sleep(5500 * time.Millisecond)
		if n := trips.Load(); n != 1 || o.f.Degraded() {
			t.Fatalf("one outage within a look (Redis restarted within it, failback done): %d trips into degraded mode in %d looks, degraded %v; want 1, back", n, o.looks.n.Load(), o.f.Degraded())
		}
	})
}

// A Sentinel failover promotes a long-running replica, which may lag
// behind the old master: a new run_id with a large uptime, whose
// master_replid2 is the old master's replication id. The watch takes it
// for an outage just ended, and the failback gives it the locks.
func TestSentinelsNewMasterIsTaken(t *testing.T) {
	s := &serverINFO{p: &partition{}}
	s.set("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", time.Now().Add(-240*time.Hour), "r1", "0000000000000000000000000000000000000000")
	f, trips := watched(t, s)
	f.WatchRestarts(20 * time.Millisecond)
	s.looks.wait(t, 2) // the watch knows the old master
	// Sentinel promotes a replica up for 9 days; go-redis' failover
	// client now talks to it, with no call failing.
	s.set("cccccccccccccccccccccccccccccccccccccccc", time.Now().Add(-216*time.Hour), "r3", "r1")
	for deadline := time.Now().Add(10 * time.Second); trips.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a Sentinel's new master (a promoted replica, long running) was not taken for an outage just ended")
		}
	}
}
