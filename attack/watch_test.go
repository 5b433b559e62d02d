package attack_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/attack"
	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// clock is a settable clock shared by the replicas of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// eventLog keeps the events the watches record, as Postgres would.
type eventLog struct {
	mu     sync.Mutex
	events []auth.Event
}

func (l *eventLog) InsertEvents(_ context.Context, _ auth.EventBatchID, batch []auth.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, batch...)
	return nil
}

func (l *eventLog) kinds() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := map[string]int{}
	for _, e := range l.events {
		n[e.Kind]++
	}
	return n
}

// inOrder returns the kinds of l's events in the order they were recorded.
func (l *eventLog) inOrder() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var kinds []string
	for _, e := range l.events {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

// replicas builds n watches on one Redis prefix, one clock and one event
// log, as n replicas of one deployment.
func replicas(t *testing.T, n int, cfg attack.Config) ([]*attack.Watch, *clock, *eventLog, *redis.Client, string) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	log := &eventLog{}
	var ws []*attack.Watch
	for range n {
		w, err := attack.New(cfg, attack.Deps{Redis: rdb, Prefix: prefix, Events: log, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	return ws, clk, log, rdb, prefix
}

// feed has w observe n attempts of outcome o at the clock's time, each for
// a distinct account from a distinct address.
func feed(w *attack.Watch, clk *clock, n int, o auth.Outcome, tag string) {
	for i := range n {
		w.Observe(auth.SignInAttempt{
			At:      clk.Now(),
			Account: fmt.Sprintf("%s%d@example.com", tag, i),
			Client:  auth.Client{Addr: netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1})},
			Outcome: o,
		})
	}
}

func tick(t *testing.T, ws ...*attack.Watch) {
	t.Helper()
	for _, w := range ws {
		if err := w.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReplicasShareTheWindow splits an attack over two replicas so that
// neither sees enough on its own: the shared counts in Redis switch both on,
// and exactly one attack_started event is recorded. After the quiet period
// without trips, attack mode ends, with exactly one attack_ended.
func TestReplicasShareTheWindow(t *testing.T) {
	cfg := attack.DefaultConfig()
	ws, clk, log, _, _ := replicas(t, 2, cfg)
	a, b := ws[0], ws[1]
	// Each replica: 12 attempts for unknown accounts and 10 wrong
	// passwords, under both floors (20 and 30); together 24 unknown.
	feed(a, clk, 12, auth.OutcomeUnknownAccount, "a")
	feed(a, clk, 10, auth.OutcomeFailed, "a")
	feed(b, clk, 12, auth.OutcomeUnknownAccount, "b")
	feed(b, clk, 10, auth.OutcomeFailed, "b")
	if a.Active() || b.Active() {
		t.Fatal("a replica switched on from its own half")
	}
	tick(t, a)
	if a.Active() || b.Active() {
		t.Fatal("on from one replica's half in Redis")
	}
	tick(t, b, a)
	if !a.Active() || !b.Active() {
		t.Fatalf("active: a %v, b %v; want both on from the shared counts", a.Active(), b.Active())
	}
	if got := log.kinds(); got[auth.EventAttackStarted] != 1 {
		t.Fatalf("events %v; want one attack_started", got)
	}
	st, err := a.AttackStatus(t.Context(), clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Active || st.Trigger != "automatic" || !st.Since.Equal(clk.Now()) || st.Attempts != 44 || st.UnknownAccounts != 24 ||
		st.DistinctAccounts != 24 || st.DistinctNetworks != 12 || len(st.TopNetworks) != 10 || st.TopNetworks[0].Count != 4 {
		t.Fatalf("status %+v", st)
	}
	// Networks are named as the dashboard shows them: an IPv4 /24.
	for _, n := range st.TopNetworks {
		if p, err := netip.ParsePrefix(n.Name); err != nil || p.Bits() != 24 || p.Masked() != p {
			t.Fatalf("top network named %q, want an IPv4 /24", n.Name)
		}
	}

	// Quiet: no trip for cfg.Quiet. One second short, still on.
	clk.Add(cfg.Quiet - time.Second)
	tick(t, a, b)
	if !a.Active() || !b.Active() {
		t.Fatal("off before the quiet period ended")
	}
	clk.Add(time.Second)
	tick(t, b, a)
	if a.Active() || b.Active() {
		t.Fatal("still on after the quiet period")
	}
	if got := log.kinds(); got[auth.EventAttackStarted] != 1 || got[auth.EventAttackEnded] != 1 {
		t.Fatalf("events %v; want one attack_started and one attack_ended", got)
	}
}

// TestExactlyOneReplicaRecords has many replicas trip on their own at the
// same moment and tick at once: one attack_started is recorded.
func TestExactlyOneReplicaRecords(t *testing.T) {
	ws, clk, log, _, _ := replicas(t, 8, attack.DefaultConfig())
	for i, w := range ws {
		feed(w, clk, 20, auth.OutcomeUnknownAccount, fmt.Sprint(i))
		if !w.Active() {
			t.Fatalf("replica %d not on at once from its own window", i)
		}
	}
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			if err := w.Tick(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := log.kinds(); got[auth.EventAttackStarted] != 1 {
		t.Fatalf("events %v; want exactly one attack_started", got)
	}
	for i, w := range ws {
		if !w.Active() {
			t.Errorf("replica %d off after the ticks", i)
		}
	}
}

// TestAdminSwitch: an administrator's "on" outlasts the quiet period; "off"
// ends it and keeps the detector from switching it on again for the quiet
// period; both are recorded with who did it; the gauge follows.
func TestAdminSwitch(t *testing.T) {
	cfg := attack.DefaultConfig()
	rdb, prefix := testenv.Redis(t)
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	log := &eventLog{}
	reg := prometheus.NewRegistry()
	w, err := attack.New(cfg, attack.Deps{Redis: rdb, Prefix: prefix, Events: log, Now: clk.Now, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	other, err := attack.New(cfg, attack.Deps{Redis: rdb, Prefix: prefix, Events: log, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	gauge := func() float64 {
		mfs, err := reg.Gather()
		if err != nil || len(mfs) != 1 || mfs[0].GetName() != "xcloak_attack_mode" {
			t.Fatalf("metrics %v, %v", mfs, err)
		}
		return mfs[0].GetMetric()[0].GetGauge().GetValue()
	}
	if gauge() != 0 {
		t.Fatal("gauge not 0 at start")
	}
	changed, err := w.SwitchAttack(t.Context(), true, "admin:root@example.com")
	if err != nil || !changed || !w.Active() || gauge() != 1 {
		t.Fatalf("on: changed %v, err %v, active %v, gauge %v", changed, err, w.Active(), gauge())
	}
	tick(t, other)
	if !other.Active() {
		t.Fatal("the other replica does not see the administrator's on")
	}
	clk.Add(2 * cfg.Quiet)
	tick(t, w, other)
	if !w.Active() {
		t.Fatal("an administrator's on ended by itself")
	}
	st, err := other.AttackStatus(t.Context(), clk.Now())
	if err != nil || !st.Active || st.Trigger != "admin" || st.By != "admin:root@example.com" {
		t.Fatalf("status %+v, %v", st, err)
	}
	if changed, err := w.SwitchAttack(t.Context(), true, "admin:other@example.com"); err != nil || changed {
		t.Fatalf("on again: changed %v, %v; want no change", changed, err)
	}
	if changed, err := other.SwitchAttack(t.Context(), false, "admin:other@example.com"); err != nil || !changed {
		t.Fatalf("off: changed %v, %v", changed, err)
	}
	tick(t, w)
	if w.Active() || other.Active() || gauge() != 0 {
		t.Fatal("still on after the administrator's off")
	}
	// The attack goes on: the detector may not switch it back on during
	// the quiet period, and may after it.
	feed(w, clk, 40, auth.OutcomeUnknownAccount, "x")
	tick(t, w, other)
	if w.Active() || other.Active() {
		t.Fatal("the detector overruled the administrator's off")
	}
	clk.Add(cfg.Quiet)
	feed(w, clk, 40, auth.OutcomeUnknownAccount, "y")
	tick(t, w)
	if !w.Active() {
		t.Fatal("the detector cannot switch on after the quiet period")
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	var got []string
	for _, e := range log.events {
		got = append(got, e.Kind+" "+e.Detail["trigger"]+" "+e.Detail["by"])
	}
	// The second "on" changed nothing but is an administrator's act all
	// the same: recorded as attack_switched.
	want := "[attack_started admin admin:root@example.com attack_switched  admin:other@example.com attack_ended admin admin:other@example.com attack_started automatic ]"
	if fmt.Sprint(got) != want {
		t.Fatalf("events %v\nwant %s", got, want)
	}
}

// BenchmarkObserve is what the sign-in path pays for the watch: one
// Observe, counting in process, Redis untouched.
func BenchmarkObserve(b *testing.B) {
	rdb, prefix := testenv.Redis(b)
	w, err := attack.New(attack.DefaultConfig(), attack.Deps{Redis: rdb, Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	addr := netip.MustParseAddr("192.0.2.1")
	for i := 0; b.Loop(); i++ {
		if i%100_000 == 0 {
			_ = w.Tick(b.Context()) // as Run does, so the batch stays small
		}
		w.Observe(auth.SignInAttempt{At: time.Now(), Account: "user@example.com", Client: auth.Client{Addr: addr}, Outcome: auth.OutcomeSucceeded})
	}
}

// trippedWithoutRedis is a watch of cfg whose Redis never answers, and
// its clock, once its own window has switched attack mode on.
func trippedWithoutRedis(t *testing.T, cfg attack.Config) (*attack.Watch, *clock) {
	t.Helper()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	w, err := attack.New(cfg, attack.Deps{Redis: dead, Prefix: "xcloak-test:dead:", Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	feed(w, clk, 20, auth.OutcomeUnknownAccount, "x")
	if !w.Active() {
		t.Fatal("not on from this replica's own window")
	}
	return w, clk
}

// TestWithoutRedis: with Redis unreachable, a replica's own window still
// switches attack mode on at once, Observe never waits, and attack mode
// ends after the quiet period from the last trip this replica saw.
func TestWithoutRedis(t *testing.T) {
	cfg := attack.DefaultConfig()
	w, clk := trippedWithoutRedis(t, cfg)
	if err := w.Tick(t.Context()); err == nil {
		t.Fatal("Tick reached a Redis that is not there")
	}
	clk.Add(cfg.Quiet - time.Second)
	_ = w.Tick(t.Context())
	if !w.Active() {
		t.Fatal("off before the quiet period")
	}
	clk.Add(time.Second)
	_ = w.Tick(t.Context())
	if w.Active() {
		t.Fatal("still on after the quiet period without Redis")
	}
}

// TestNewReplicaHeldToSharedBaseline: a replica that has just started,
// with no history of its own, trips on its own window only past the
// thresholds the deployment's shared baseline sets, not the bare floors.
func TestNewReplicaHeldToSharedBaseline(t *testing.T) {
	cfg := attack.DefaultConfig()
	ws, clk, _, _, _ := replicas(t, 2, cfg)
	old, fresh := ws[0], ws[1]
	// Two hours of a big deployment: 60 unknown accounts a minute (10 per
	// 10-second window, so a threshold of 4 x 10 = 40) among 6,000 sign-ins.
	for range 120 {
		for range 6 {
			feed(old, clk, 10, auth.OutcomeUnknownAccount, "u")
			feed(old, clk, 990, auth.OutcomeSucceeded, "s")
			clk.Add(10 * time.Second)
		}
		tick(t, old)
	}
	clk.Add(time.Minute) // past the last window
	if old.Active() {
		t.Fatal("the busy deployment tripped")
	}
	tick(t, fresh) // reads the shared baseline, as Run does at once
	feed(fresh, clk, 39, auth.OutcomeUnknownAccount, "a")
	if fresh.Active() {
		t.Fatal("a fresh replica tripped at its floor (20) under a shared threshold of 40")
	}
	feed(fresh, clk, 1, auth.OutcomeUnknownAccount, "b")
	if !fresh.Active() {
		t.Fatal("not on at the shared threshold")
	}
}

// TestReplicasShareTheLongWindow: a run paced under the short window's
// floors and split over two replicas, each also under the long window's
// floors, trips attack mode from the minute counts they share in Redis.
func TestReplicasShareTheLongWindow(t *testing.T) {
	cfg := attack.DefaultConfig()
	ws, clk, log, _, _ := replicas(t, 2, cfg)
	a, b := ws[0], ws[1]
	var mu sync.Mutex
	var starts []time.Time
	for _, w := range ws {
		w.OnStart(func(_ context.Context, since time.Time) {
			mu.Lock()
			defer mu.Unlock()
			starts = append(starts, since)
		})
	}
	// Each replica, every 10 s: 4 wrong passwords and 2 unknown accounts;
	// together 12 failures (floor 30). In 10 minutes each has 360
	// failures (floor 600); together 720.
	perReplica := int64(0)
	for i := 0; ; i++ {
		if i >= int(cfg.LongWindow/(10*time.Second)) {
			t.Fatalf("not on after a long window of the shared run (%d failures a replica)", perReplica)
		}
		for j, w := range ws {
			tag := fmt.Sprintf("r%d-%d-", j, i)
			feed(w, clk, 4, auth.OutcomeFailed, tag+"f")
			feed(w, clk, 2, auth.OutcomeUnknownAccount, tag+"u")
		}
		perReplica += 6
		if a.Active() || b.Active() {
			t.Fatalf("a replica tripped on its own after %d failures", perReplica)
		}
		tick(t, a, b)
		if a.Active() || b.Active() {
			break
		}
		clk.Add(10 * time.Second)
	}
	if 2*perReplica < cfg.LongFailures || perReplica >= cfg.LongFailures {
		t.Errorf("tripped at %d failures a replica, %d together; want each under and both at least %d", perReplica, 2*perReplica, cfg.LongFailures)
	}
	tick(t, a, b)
	if !a.Active() || !b.Active() {
		t.Errorf("replicas on: %v, %v; want both", a.Active(), b.Active())
	}
	if got := log.kinds()[auth.EventAttackStarted]; got != 1 {
		t.Errorf("%d attack_started events, want 1", got)
	}
	log.mu.Lock()
	for _, e := range log.events {
		if e.Kind == auth.EventAttackStarted && e.Detail["signal"] != string(attack.TripLongFailures) {
			t.Errorf("attack_started by %q, want %s: %v", e.Detail["signal"], attack.TripLongFailures, e.Detail)
		}
	}
	log.mu.Unlock()
	// The run went on for a long window under the short one's floors: the
	// browsers new to their accounts in all of it are signed out.
	mu.Lock()
	if want := clk.Now().Add(-cfg.LongWindow); len(starts) != 1 || !starts[0].Equal(want) {
		t.Errorf("OnStart called with %v, want once with %s", starts, want)
	}
	mu.Unlock()
	t.Logf("on after %d failures a replica, %d together", perReplica, 2*perReplica)
}

// TestObserveAllocatesNothing: counting a sign-in attempt, on every
// sign-in's path, allocates nothing once its second, minute, account and
// network are held: a flood repeats them thousands of times a second.
func TestObserveAllocatesNothing(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	w, err := attack.New(attack.DefaultConfig(), attack.Deps{Redis: rdb, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	a := auth.SignInAttempt{At: time.Now(), Account: "user@example.com", Client: auth.Client{Addr: netip.MustParseAddr("192.0.2.1")}, Outcome: auth.OutcomeFailed}
	w.Observe(a)
	if n := testing.AllocsPerRun(100, func() { w.Observe(a) }); n != 0 {
		t.Fatalf("Observe allocates %v times, want 0", n)
	}
}

// restartRedis stands for a Redis restarted without its data: every key
// of the deployment is gone.
func restartRedis(t *testing.T, rdb *redis.Client, prefix string) {
	t.Helper()
	keys, err := rdb.Keys(t.Context(), prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		if err := rdb.Del(t.Context(), keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRedisRestartKeepsAttackMode: a Redis restarted without its data
// does not switch attack mode off, nor lift an administrator's "off":
// the replicas' next ticks put back the state they last read, so an
// administrator's "on" still lasts until an "off", the attack that goes
// on does not start again (no second attack_started, no second sign-out
// of new browsers), and the detector stays held off.
func TestRedisRestartKeepsAttackMode(t *testing.T) {
	cfg := attack.DefaultConfig()
	t.Run("administrator's on", func(t *testing.T) {
		ws, clk, _, rdb, prefix := replicas(t, 2, cfg)
		a, b := ws[0], ws[1]
		if _, err := a.SwitchAttack(t.Context(), true, "admin:root@example.com"); err != nil {
			t.Fatal(err)
		}
		tick(t, b)
		restartRedis(t, rdb, prefix)
		clk.Add(time.Second)
		tick(t, b, a)
		if !a.Active() || !b.Active() {
			t.Fatalf("active: a %v, b %v; want both still on", a.Active(), b.Active())
		}
		clk.Add(2 * cfg.Quiet)
		tick(t, a, b)
		st, err := a.AttackStatus(t.Context(), clk.Now())
		if err != nil || !st.Active || st.Trigger != "admin" || st.By != "admin:root@example.com" {
			t.Fatalf("status %+v, %v; want the administrator's on", st, err)
		}
	})
	t.Run("attack going on", func(t *testing.T) {
		ws, clk, log, rdb, prefix := replicas(t, 2, cfg)
		a, b := ws[0], ws[1]
		starts := 0
		a.OnStart(func(context.Context, time.Time) { starts++ })
		b.OnStart(func(context.Context, time.Time) { starts++ })
		feed(a, clk, 25, auth.OutcomeUnknownAccount, "a")
		tick(t, a, b)
		restartRedis(t, rdb, prefix)
		clk.Add(time.Minute)
		feed(b, clk, 25, auth.OutcomeUnknownAccount, "b")
		tick(t, b, a)
		if !a.Active() || !b.Active() {
			t.Fatalf("active: a %v, b %v; want both on", a.Active(), b.Active())
		}
		if got := log.kinds(); got[auth.EventAttackStarted] != 1 || got[auth.EventAttackEnded] != 0 || starts != 1 {
			t.Fatalf("events %v, %d starts; want one attack_started, one start", got, starts)
		}
	})
	t.Run("administrator's off", func(t *testing.T) {
		ws, clk, _, rdb, prefix := replicas(t, 2, cfg)
		a, b := ws[0], ws[1]
		if _, err := a.SwitchAttack(t.Context(), false, "admin:root@example.com"); err != nil {
			t.Fatal(err)
		}
		tick(t, b)
		restartRedis(t, rdb, prefix)
		clk.Add(time.Second)
		tick(t, b)
		feed(a, clk, 40, auth.OutcomeUnknownAccount, "x")
		tick(t, a, b)
		if a.Active() || b.Active() {
			t.Fatalf("active: a %v, b %v; the detector overruled the administrator's off", a.Active(), b.Active())
		}
	})
}

// lossyLog stores events once per batch id, as Postgres does, and answers
// its first lost calls with an error after storing, as a lost answer.
type lossyLog struct {
	eventLog
	seen  map[auth.EventBatchID]bool
	lost  int
	calls int
}

func (l *lossyLog) InsertEvents(ctx context.Context, id auth.EventBatchID, batch []auth.Event) error {
	l.mu.Lock()
	l.calls++
	seen := l.seen[id]
	l.seen[id] = true
	lose := l.lost > 0
	if lose {
		l.lost--
	}
	l.mu.Unlock()
	if !seen {
		_ = l.eventLog.InsertEvents(ctx, id, batch)
	}
	if lose {
		return errors.New("connection reset by peer")
	}
	return nil
}

// TestAttackEventWrittenAgainUnderItsID: an attack_started whose write's
// answer was lost is written again under the same id, and stored once.
func TestAttackEventWrittenAgainUnderItsID(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	log := &lossyLog{seen: map[auth.EventBatchID]bool{}, lost: 1}
	w, err := attack.New(attack.DefaultConfig(), attack.Deps{Redis: rdb, Prefix: prefix, Events: log, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	feed(w, clk, 24, auth.OutcomeUnknownAccount, "a")
	feed(w, clk, 20, auth.OutcomeFailed, "a")
	tick(t, w)
	if !w.Active() {
		t.Fatal("attack mode not on")
	}
	if got := log.kinds(); got[auth.EventAttackStarted] != 1 || log.calls != 2 {
		t.Fatalf("events %v in %d writes; want one attack_started, written again once", got, log.calls)
	}
}

// TestNetworkOfTranslatedIPv4: an IPv4 client an IPv6 address stands for
// (mapped, NAT64's well-known prefix) is ranked in its IPv4 /24, as
// the limits count it, not in one IPv6 /48 with every other such client.
func TestNetworkOfTranslatedIPv4(t *testing.T) {
	for addr, want := range map[string]string{
		"203.0.113.7":          "203.0.113.0/24",
		"::ffff:203.0.113.7":   "203.0.113.0/24",
		"64:ff9b::203.0.113.7": "203.0.113.0/24",
		"2002:cb00:7107:1::9":  "2002:cb00:7107::/48",
		"2001:db8:7:1::9":      "2001:db8:7::/48",
	} {
		if got := attack.Network(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Network(%s) = %s, want %s", addr, got, want)
		}
	}
}

// TestWithoutRedisAttackGoingOn: with Redis unreachable, attack mode that
// this replica's own window switched on lasts the quiet period from its
// last trip, not its first: an attack that goes on keeps it on, rather
// than having it end and letting sign-ins through unheld until the next
// attempt trips it again.
func TestWithoutRedisAttackGoingOn(t *testing.T) {
	cfg := attack.DefaultConfig()
	w, clk := trippedWithoutRedis(t, cfg)
	// The attack goes on: every minute a window over the floor.
	for i := range int(cfg.Quiet / time.Minute) {
		clk.Add(time.Minute)
		feed(w, clk, 20, auth.OutcomeUnknownAccount, fmt.Sprint("y", i))
		_ = w.Tick(t.Context())
		if !w.Active() {
			t.Fatalf("off %s after the first trip, the attack going on", clk.Now().Sub(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)))
		}
	}
	clk.Add(cfg.Quiet - time.Second)
	_ = w.Tick(t.Context())
	if !w.Active() {
		t.Fatal("off before the quiet period from the last trip")
	}
	clk.Add(time.Second)
	_ = w.Tick(t.Context())
	if w.Active() {
		t.Fatal("still on after the quiet period from the last trip")
	}
}

// refusingLog refuses every batch for what its rows hold, as Postgres
// refuses a NUL byte, and counts the calls.
type refusingLog struct {
	mu    sync.Mutex
	calls int
}

func (l *refusingLog) InsertEvents(context.Context, auth.EventBatchID, []auth.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	return fmt.Errorf("%w: ERROR: invalid byte sequence (SQLSTATE 22021)", auth.ErrEventsRefused)
}

// TestAttackEventRefusedForGoodIsNotTriedAgain: an attack_started the
// store refuses for what it holds is given up at once, not tried again
// for the write's whole time while the tick waits: no retry can change a
// refusal of its content.
func TestAttackEventRefusedForGoodIsNotTriedAgain(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	log := &refusingLog{}
	w, err := attack.New(attack.DefaultConfig(), attack.Deps{Redis: rdb, Prefix: prefix, Events: log, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	feed(w, clk, 24, auth.OutcomeUnknownAccount, "a")
	feed(w, clk, 20, auth.OutcomeFailed, "a")
	tick(t, w)
	if !w.Active() {
		t.Fatal("attack mode not on")
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if log.calls != 1 {
		t.Fatalf("%d writes of a refused event; want 1", log.calls)
	}
}

// TestReplicasSumAPaceAtTheFloor: an attack at exactly the unknown-account
// floor's pace, split over two replicas whose ticks fall at different
// moments of each second (as they do: each ticks a second after it
// started), trips attack mode. Each tick reads the window while the other
// replica has yet to flush its part of the last second, so the window
// ending at the tick's second alone never holds the whole sum.
func TestReplicasSumAPaceAtTheFloor(t *testing.T) {
	cfg := attack.DefaultConfig()
	ws, clk, _, _, _ := replicas(t, 2, cfg)
	a, b := ws[0], ws[1]
	// Together cfg.UnknownAccounts in every window: one a second at each
	// replica, a at .2 and b at .7 of the second; b ticks at .0, a at .5.
	perSecond := cfg.UnknownAccounts / int64(cfg.Window/time.Second)
	if perSecond != 2 {
		t.Fatalf("the test assumes a floor of 2 unknown accounts a second, not %d", perSecond)
	}
	for s := range 3 * int(cfg.Window/time.Second) {
		tick(t, b)
		clk.Add(200 * time.Millisecond)
		feed(a, clk, 1, auth.OutcomeUnknownAccount, fmt.Sprintf("a%d-", s))
		clk.Add(300 * time.Millisecond)
		tick(t, a)
		clk.Add(200 * time.Millisecond)
		feed(b, clk, 1, auth.OutcomeUnknownAccount, fmt.Sprintf("b%d-", s))
		clk.Add(300 * time.Millisecond)
		if a.Active() || b.Active() {
			t.Logf("on after %d seconds", s+1)
			return
		}
	}
	t.Fatalf("never on from %d unknown accounts in every window of the two replicas together (floor %d)",
		2*int64(cfg.Window/time.Second), cfg.UnknownAccounts)
}
