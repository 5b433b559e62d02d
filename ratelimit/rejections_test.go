package ratelimit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

// TestRememberedRejectionsStayExact: remembering rejections never lets a
// request past a limit.
func TestRememberedRejectionsStayExact(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	other, _ := testenv.Redis(t)
	one, two := newLimiter(t, rdb, prefix), newLimiter(t, other, prefix)
	one.RememberRejections(time.Second, 1000)
	two.RememberRejections(time.Second, 1000)
	fresh := newLimiter(t, rdb, prefix)
	for _, limit := range []int{1, 10, 100} {
		for trial := range trials {
			rules := []ratelimit.Rule{
				{Name: "login_ip", ID: fmt.Sprint("ip", limit, trial), Limit: ratelimit.Limit{Count: 5 * limit, Window: time.Minute}},
				{Name: "login_account", ID: fmt.Sprint("acct", limit, trial), Limit: ratelimit.Limit{Count: limit, Window: time.Minute}},
			}
			got := burst(t, 1000, func(i int) (bool, error) {
				l := one
				if i%2 == 1 {
					l = two
				}
				d, err := l.AllowAll(t.Context(), rules...)
				return d.Allowed, err
			})
			if got < 1 || got > limit {
				t.Errorf("limit %d trial %d: admitted %d, want 1..%d", limit, trial, got, limit)
			}
			// A limiter that remembers nothing tops up: the burst must
			// have left exactly the quota it did not use.
			more := topUp(t, limit, func() (bool, error) {
				d, err := fresh.AllowAll(t.Context(), rules...)
				return d.Allowed, err
			})
			if got+more != limit {
				t.Errorf("limit %d trial %d: burst admitted %d and %d more after it, want exactly %d in all", limit, trial, got, more, limit)
			}
		}
	}
}

// TestRememberedRejectionsSkipRedis: after Redis rejected a rule once,
// the limiter rejects it without Redis (here: with Redis gone) until the
// memory's lifetime ends, with Redis' retry-after; then it asks Redis again.
func TestRememberedRejectionsSkipRedis(t *testing.T) {
	srv := testenv.PrivateRedis(t)
	rdb := fastClient(t, srv.URL())
	l := newLimiter(t, rdb, "xcloak:")
	// Long enough to outlast stopping Redis on a loaded machine, which
	// comes between the rejection and its use from memory.
	const memory = 2 * time.Second
	l.RememberRejections(memory, 100)
	rule := ratelimit.Rule{Name: "login_account", ID: "victim", Limit: ratelimit.Limit{Count: 1, Window: time.Hour}}
	other := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.1", Limit: ratelimit.PerMinute(100)}
	if d, err := l.AllowAll(t.Context(), other, rule); err != nil || !d.Allowed {
		t.Fatalf("first request: %+v, %v", d, err)
	}
	asked := time.Now()
	first, err := l.AllowAll(t.Context(), other, rule)
	if err != nil || first.Allowed || first.FromMemory {
		t.Fatalf("second request: %+v, %v; want Redis' rejection", first, err)
	}

	srv.Stop()
	d, err := l.AllowAll(t.Context(), other, rule)
	if err != nil || d.Allowed || !d.FromMemory {
		t.Fatalf("with Redis gone: %+v, %v; want the remembered rejection", d, err)
	}
	// Redis' answer counted down by the time since it was asked for, at
	// the least: never early.
	if least := first.RetryAfter - time.Since(asked); d.RetryAfter < least || d.RetryAfter > first.RetryAfter {
		t.Fatalf("remembered retry-after %v, want within [%v, %v]: Redis' own, counted down", d.RetryAfter, least, first.RetryAfter)
	}
	if rej := d.Rejected(); len(rej) != 1 || rej[0].Name != "login_account" {
		t.Fatalf("rejected by %+v, want login_account", rej)
	}
	time.Sleep(memory + 100*time.Millisecond)
	if _, err := l.AllowAll(t.Context(), other, rule); err == nil {
		t.Fatal("after the memory's lifetime the limiter did not ask Redis (which is gone)")
	}
}

// TestUnlockForgetsRememberedLock: a lock is remembered like a full rule;
// an unlock through a process takes effect there at once, and in another
// process within the memory's lifetime.
func TestUnlockForgetsRememberedLock(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	// Long enough that a loaded machine's pause between asking Redis and
	// asking again does not let the remembered lock lapse.
	const memory = 2 * time.Second
	replica := func() *ratelimit.Failover {
		shared, err := ratelimit.NewRedisStore(rdb, prefix, policies)
		if err != nil {
			t.Fatal(err)
		}
		shared.RememberRejections(memory, 100)
		f := ratelimit.NewFailover(shared, newLocal(t), rdb, ratelimit.FailLocal, nil)
		t.Cleanup(f.Close)
		return f
	}
	here, there := replica(), replica()
	rule := ratelimit.Rule{Name: "login_account", ID: "a@example.com", Limit: ratelimit.PerMinute(100), Lockable: true}
	for range policy.Threshold {
		here.Fail(t.Context(), "login_account", "a@example.com", "")
	}
	for _, f := range []*ratelimit.Failover{here, there} {
		f.AllowAll(t.Context(), rule) // Redis says locked; remembered
		d, _ := f.AllowAll(t.Context(), rule)
		if d.Allowed || !d.FromMemory || !d.Results[0].Locked {
			t.Fatalf("while locked: %+v; want the remembered lock", d)
		}
		if left := rdb.PTTL(t.Context(), keyOf(t, prefix, "a@example.com", ":lock")).Val(); d.RetryAfter < left {
			t.Fatalf("remembered lock: retry-after %v, but the lock has %v left", d.RetryAfter, left)
		}
	}
	if was, err := here.Clear(t.Context(), "login_account", "a@example.com"); err != nil || !was {
		t.Fatalf("Clear: %v, %v", was, err)
	}
	if d, err := here.AllowAll(t.Context(), rule); err != nil || !d.Allowed {
		t.Fatalf("right after the unlock, same process: %+v, %v; want admitted", d, err)
	}
	time.Sleep(memory + 100*time.Millisecond)
	if d, err := there.AllowAll(t.Context(), rule); err != nil || !d.Allowed {
		t.Fatalf("after the memory's lifetime, other process: %+v, %v; want admitted", d, err)
	}
}

// TestUnlockWinsOverDecisionInFlight: a decision that read the lock in
// Redis before an unlock on this process, and whose answer arrives after
// it, is not remembered: the unlock takes effect here at once, as
// promised, and the next decision asks Redis and is admitted. A hook on
// the client holds the decision's answer until the unlock is done.
func TestUnlockWinsOverDecisionInFlight(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	hold := &holdAnswer{}
	rdb.AddHook(hold)
	s, err := ratelimit.NewRedisStore(rdb, prefix, policies)
	if err != nil {
		t.Fatal(err)
	}
	s.RememberRejections(time.Minute, 100)
	id := "in-flight@example.com"
	rule := ratelimit.Rule{Name: "login_account", ID: id, Limit: ratelimit.PerMinute(100), Lockable: true}
	for range policy.Threshold {
		if _, err := s.Fail(t.Context(), "login_account", id, ""); err != nil {
			t.Fatal(err)
		}
	}

	answered, release := hold.next()
	done := make(chan ratelimit.Decision, 1)
	go func() {
		d, err := s.AllowAll(t.Context(), rule)
		if err != nil {
			t.Error(err)
		}
		done <- d
	}()
	<-answered // Redis said locked; the decision has not seen it yet
	if was, err := s.Clear(t.Context(), "login_account", id); err != nil || !was {
		t.Fatalf("Clear: %v, %v; want the lock ended", was, err)
	}
	close(release)
	if d := <-done; d.Allowed || !d.Results[0].Locked {
		t.Fatalf("the decision in flight: %+v; want Redis' answer from before the unlock, locked", d)
	}
	if d, ok := s.Remembered(rule); ok {
		t.Fatalf("after the unlock: %+v remembered; want nothing", d)
	}
	if d, err := s.AllowAll(t.Context(), rule); err != nil || !d.Allowed {
		t.Fatalf("the next decision after the unlock, same process: %+v, %v; want admitted", d, err)
	}
}

// holdAnswer is a hook that, once armed by next, holds back the answer
// of the next script it sees, after Redis gave it.
type holdAnswer struct {
	mu                sync.Mutex
	answered, release chan struct{}
}

// next arms h: answered is closed when Redis has answered the next
// script, whose answer is then held until release is closed.
func (h *holdAnswer) next() (answered <-chan struct{}, release chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answered, h.release = make(chan struct{}), make(chan struct{})
	return h.answered, h.release
}

func (*holdAnswer) DialHook(next redis.DialHook) redis.DialHook { return next }

func (*holdAnswer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *holdAnswer) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return err
		}
		h.mu.Lock()
		answered, release := h.answered, h.release
		h.answered = nil
		h.mu.Unlock()
		if answered != nil {
			close(answered)
			<-release
		}
		return err
	}
}

// TestRememberedAsksNothing: Remembered answers a rejection only from the
// memory, without Redis (here: gone) and without recording anything; it
// answers false for rules it remembers no rejection of, for a store
// without a memory, and for a Failover that has lost Redis, whose local
// store then decides: that one answers what its local store rejects.
func TestRememberedAsksNothing(t *testing.T) {
	srv := testenv.PrivateRedis(t)
	rdb := fastClient(t, srv.URL())
	shared, err := ratelimit.NewRedisStore(rdb, "xcloak:", policies)
	if err != nil {
		t.Fatal(err)
	}
	shared.RememberRejections(time.Hour, 100)
	f := ratelimit.NewFailover(shared, newLocal(t), rdb, ratelimit.FailLocal, nil)
	t.Cleanup(f.Close)
	full := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.0/24", Limit: ratelimit.Limit{Count: 1, Window: time.Hour}}
	free := ratelimit.Rule{Name: "login_account", ID: "ann", Limit: ratelimit.Limit{Count: 2, Window: time.Hour}}
	if _, ok := f.Remembered(full); ok {
		t.Fatal("a rule never rejected is remembered as rejecting")
	}
	if d, err := f.AllowAll(t.Context(), full); err != nil || !d.Allowed {
		t.Fatalf("first request: %+v, %v", d, err)
	}
	if _, ok := f.Remembered(full); ok {
		t.Fatal("a rule Redis admitted is remembered as rejecting")
	}
	first, err := f.AllowAll(t.Context(), full, free)
	if err != nil || first.Allowed || first.FromMemory {
		t.Fatalf("second request: %+v, %v; want Redis' rejection", first, err)
	}
	for range 3 {
		d, ok := f.Remembered(free, full)
		if !ok || d.Allowed || !d.FromMemory || d.RetryAfter <= 0 || d.RetryAfter > first.RetryAfter {
			t.Fatalf("remembered: %+v %v; want the rejection from memory, retry-after within (0, %v]", d, ok, first.RetryAfter)
		}
		if rej := d.Rejected(); len(rej) != 1 || rej[0].Name != "login_ip" {
			t.Fatalf("remembered rejected by %+v, want login_ip", rej)
		}
	}
	if _, ok := f.Remembered(free); ok {
		t.Fatal("a rule whose rejection is not remembered answered from memory")
	}
	// Nothing was recorded for free: both of its requests are left.
	for i := range 2 {
		if d, err := f.AllowAll(t.Context(), free); err != nil || !d.Allowed {
			t.Fatalf("free's request %d after the questions: %+v, %v; want admitted", i, d, err)
		}
	}
	if _, ok := newLimiter(t, rdb, "xcloak:").Remembered(full); ok {
		t.Fatal("a limiter without a memory answered from one")
	}
	if _, ok := newLocal(t).Remembered(full); ok {
		t.Fatal("a Local answered from a memory")
	}

	srv.Stop()
	if _, ok := shared.Remembered(full); !ok {
		t.Fatal("with Redis gone, the memory did not answer")
	}
	if err := f.Check(t.Context()); err == nil || !f.Degraded() {
		t.Fatalf("Check with Redis gone: %v, degraded %v", err, f.Degraded())
	}
	if _, ok := f.Remembered(full); ok {
		t.Fatal("a degraded Failover answered from Redis' memory, not its local store's")
	}
	// Degraded under local, it answers what its local store would reject,
	// recording nothing either.
	if d, err := f.AllowAll(t.Context(), full); err != nil || !d.Allowed {
		t.Fatalf("first request in process: %+v, %v", d, err)
	}
	if d, ok := f.Remembered(free, full); !ok || d.Allowed || !d.FromMemory || d.RetryAfter <= 0 {
		t.Fatalf("degraded, a rule its local store rejects: %+v %v; want the rejection", d, ok)
	}
	for i := range 2 {
		if d, err := f.AllowAll(t.Context(), free); err != nil || !d.Allowed {
			t.Fatalf("free's request %d in process after the questions: %+v, %v; want admitted", i, d, err)
		}
	}
	closed := ratelimit.NewFailover(shared, newLocal(t), rdb, ratelimit.FailClosed, nil)
	t.Cleanup(closed.Close)
	if err := closed.Check(t.Context()); err == nil || !closed.Degraded() {
		t.Fatalf("Check with Redis gone: %v, degraded %v", err, closed.Degraded())
	}
	if _, ok := closed.Remembered(full); ok {
		t.Fatal("a degraded Failover under the closed policy answered a rejection")
	}
}

// TestAllowFromMemory: Allow answered from the remembered rejections says
// what AllowAll would: the rule's name and limit, rejected, with a
// retry-after that is not zero (a zero would tell the client to retry at
// once) and whether the identity is locked.
func TestAllowFromMemory(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	l.RememberRejections(time.Minute, 100)
	full := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.1", Limit: ratelimit.Limit{Count: 1, Window: time.Hour}}
	if r, err := l.Allow(t.Context(), full); err != nil || !r.Allowed {
		t.Fatalf("first request: %+v, %v", r, err)
	}
	first, err := l.Allow(t.Context(), full)
	if err != nil || first.Allowed || first.RetryAfter <= 0 {
		t.Fatalf("second request: %+v, %v; want Redis' rejection", first, err)
	}
	if d, ok := l.Remembered(full); !ok || !d.FromMemory {
		t.Fatalf("Remembered: %+v, %v; want the rejection remembered", d, ok)
	}
	r, err := l.Allow(t.Context(), full)
	if err != nil || r.Allowed || r.Name != full.Name || r.Limit != full.Limit || r.RetryAfter <= 0 || r.RetryAfter > first.RetryAfter {
		t.Fatalf("from memory: %+v, %v; want rejected by %s with retry-after within (0, %v]", r, err, full.Name, first.RetryAfter)
	}

	// A lock, remembered, says Locked.
	locked := ratelimit.Rule{Name: "login_account", ID: "a@example.com", Limit: ratelimit.PerMinute(100), Lockable: true}
	if err := rdb.Set(t.Context(), keyOf(t, prefix, locked.ID, ":lock"), 1, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		r, err := l.Allow(t.Context(), locked)
		if err != nil || r.Allowed || !r.Locked || r.RetryAfter <= 0 {
			t.Fatalf("locked, request %d: %+v, %v; want Locked with a retry-after", i, r, err)
		}
	}
}

// TestRememberedCostsNoKeys: a decision answered from the remembered
// rejections builds no key and hashes no identity: its one allocation is
// the results it answers with. A flood of rejected requests is then
// rejected for the cost of a map lookup.
func TestRememberedCostsNoKeys(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	l.RememberRejections(time.Minute, 100)
	rules := []ratelimit.Rule{
		{Name: "login_ip", ID: "192.0.2.1", Limit: ratelimit.Limit{Count: 1, Window: time.Hour}},
		{Name: "login_account", ID: "a@example.com", Limit: ratelimit.Limit{Count: 10, Window: time.Hour}, Lockable: true},
	}
	if d, err := l.AllowAll(t.Context(), rules...); err != nil || !d.Allowed {
		t.Fatalf("first request: %+v, %v", d, err)
	}
	redis, err := l.AllowAll(t.Context(), rules...)
	if err != nil || redis.Allowed || redis.FromMemory {
		t.Fatalf("second request: %+v, %v; want Redis' rejection", redis, err)
	}
	d, err := l.AllowAll(t.Context(), rules...)
	if err != nil || !d.FromMemory {
		t.Fatalf("third request: %+v, %v; want it answered from memory", d, err)
	}
	got, want := d.Results[0], redis.Results[0]
	if got.Name != want.Name || got.Limit != want.Limit || got.Allowed || got.Locked || got.RetryAfter <= 0 || got.RetryAfter > want.RetryAfter {
		t.Fatalf("from memory: %+v; want Redis' rejection %+v with a retry-after within (0, %v]", got, want, want.RetryAfter)
	}
	if r := d.Results[1]; r.Name != "login_account" || !r.Allowed {
		t.Fatalf("the rule not consulted: %+v; want it named and not rejecting", r)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if d, err := l.AllowAll(t.Context(), rules...); err != nil || !d.FromMemory {
			t.Fatalf("from memory: %+v, %v", d, err)
		}
	})
	if allocs > 1 {
		t.Errorf("AllowAll from memory: %v allocations; want 1 (its results), no keys built", allocs)
	}
	if allocs := testing.AllocsPerRun(100, func() { l.Remembered(rules...) }); allocs > 1 {
		t.Errorf("Remembered: %v allocations; want 1 (its results), no keys built", allocs)
	}
}

// TestFailoverRememberedCostsNoTimeout: behind a Failover, a decision the
// shared store's memory answers costs no Redis call and so no bound on
// one either (a context with a timeout: a timer per request), just the
// results.
func TestFailoverRememberedCostsNoTimeout(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	shared, err := ratelimit.NewRedisStore(rdb, prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	shared.RememberRejections(time.Minute, 100)
	local, err := ratelimit.NewLocal(nil, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := ratelimit.NewFailover(shared, local, rdb, ratelimit.FailClosed, nil)
	t.Cleanup(f.Close)
	rule := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.1", Limit: ratelimit.Limit{Count: 1, Window: time.Hour}}
	for i, want := range []bool{true, false} {
		if d, err := f.AllowAll(t.Context(), rule); err != nil || d.Allowed != want || d.FromMemory {
			t.Fatalf("request %d: %+v, %v; want Redis' answer, allowed %v", i, d, err, want)
		}
	}
	d, err := f.AllowAll(t.Context(), rule)
	if err != nil || d.Allowed || !d.FromMemory || d.RetryAfter <= 0 {
		t.Fatalf("from memory: %+v, %v; want a rejection with a retry-after", d, err)
	}
	rules := []ratelimit.Rule{rule} // as a request's rules come
	allocs := testing.AllocsPerRun(100, func() {
		if d, err := f.AllowAll(t.Context(), rules...); err != nil || !d.FromMemory {
			t.Fatalf("from memory: %+v, %v", d, err)
		}
	})
	if allocs > 1 {
		t.Errorf("Failover.AllowAll from memory: %v allocations; want 1 (its results)", allocs)
	}
}

// BenchmarkRemembered is a sign-in's decision answered from the memory of
// full rules, on every core at once: the rules of a sign-in, one of them
// full.
func BenchmarkRemembered(b *testing.B) {
	rdb, prefix := testenv.Redis(b)
	l := newLimiter(b, rdb, prefix)
	l.RememberRejections(time.Minute, 100)
	rules := []ratelimit.Rule{
		{Name: "login_ip", ID: "192.0.2.1", Limit: ratelimit.Limit{Count: 1000, Window: time.Hour}},
		{Name: "login_net", ID: "192.0.2.0/24", Limit: ratelimit.Limit{Count: 1000, Window: time.Hour}},
		{Name: "login_account", ID: "a@example.com", Limit: ratelimit.Limit{Count: 1, Window: time.Hour}, Lockable: true},
		{Name: "login_password", ID: "0123456789abcdef0123456789abcdef", Limit: ratelimit.Limit{Count: 1000, Window: time.Hour}},
	}
	for range 2 {
		if _, err := l.AllowAll(b.Context(), rules...); err != nil {
			b.Fatal(err)
		}
	}
	if _, ok := l.Remembered(rules...); !ok {
		b.Fatal("the full rule is not remembered")
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Remembered(rules...)
		}
	})
}

// BenchmarkFailoverRemembered is BenchmarkRemembered's decision as a
// service asks for it: Failover.AllowAll, answered from the shared
// store's memory.
func BenchmarkFailoverRemembered(b *testing.B) {
	rdb, prefix := testenv.Redis(b)
	shared, err := ratelimit.NewRedisStore(rdb, prefix, nil)
	if err != nil {
		b.Fatal(err)
	}
	shared.RememberRejections(time.Minute, 100)
	local, err := ratelimit.NewLocal(nil, 100, nil)
	if err != nil {
		b.Fatal(err)
	}
	f := ratelimit.NewFailover(shared, local, rdb, ratelimit.FailClosed, nil)
	b.Cleanup(f.Close)
	rules := []ratelimit.Rule{
		{Name: "login_ip", ID: "192.0.2.1", Limit: ratelimit.Limit{Count: 1000, Window: time.Hour}},
		{Name: "login_net", ID: "192.0.2.0/24", Limit: ratelimit.Limit{Count: 1000, Window: time.Hour}},
		{Name: "login_account", ID: "a@example.com", Limit: ratelimit.Limit{Count: 1, Window: time.Hour}},
		{Name: "login_password", ID: "0123456789abcdef0123456789abcdef", Limit: ratelimit.Limit{Count: 1000, Window: time.Hour}},
	}
	for range 3 {
		if _, err := f.AllowAll(b.Context(), rules...); err != nil {
			b.Fatal(err)
		}
	}
	if d, err := f.AllowAll(b.Context(), rules...); err != nil || !d.FromMemory {
		b.Fatalf("not answered from memory: %+v, %v", d, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.AllowAll(b.Context(), rules...); err != nil {
			b.Fatal(err)
		}
	}
}

// TestResetForgetsRememberedRejection: a rule's log that Reset deletes
// admits again at once in the process that reset it, however recently
// that process remembered the log full: a mark given back (an attempt
// id whose outcome could not be taken) must not go on being refused
// from memory.
func TestResetForgetsRememberedRejection(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	s, err := ratelimit.NewRedisStore(rdb, prefix, policies)
	if err != nil {
		t.Fatal(err)
	}
	s.RememberRejections(time.Minute, 100)
	rule := ratelimit.Rule{Name: "attempt_used", ID: "nonce", Limit: ratelimit.Limit{Count: 1, Window: time.Hour}}
	for i, want := range []bool{true, false, false} {
		if d, err := s.AllowAll(t.Context(), rule); err != nil || d.Allowed != want {
			t.Fatalf("request %d: %+v, %v; want admitted %t", i, d, err, want)
		}
	}
	if err := s.Reset(t.Context(), rule.Name, rule.ID); err != nil {
		t.Fatal(err)
	}
	if d, err := s.AllowAll(t.Context(), rule); err != nil || !d.Allowed {
		t.Fatalf("after Reset: %+v, %v; want admitted, not refused from memory", d, err)
	}
}

// TestRememberedLimitNoAnswerForLockOnly: a rejection remembered for a
// rule's limit, full for up to its window, says nothing of its lock: a
// lock-only rule of that name and identity is asked of Redis, and admits
// while the identity is not locked.
func TestRememberedLimitNoAnswerForLockOnly(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	s, err := ratelimit.NewRedisStore(rdb, prefix, map[string]ratelimit.LockoutPolicy{"login_account": {Threshold: 5, Duration: time.Minute, MaxDuration: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	s.RememberRejections(time.Minute, 100)
	rule := ratelimit.Rule{Name: "login_account", ID: "victim", Limit: ratelimit.Limit{Count: 1, Window: time.Hour}, Lockable: true}
	for range 2 {
		if _, err := s.AllowAll(t.Context(), rule); err != nil {
			t.Fatal(err)
		}
	}
	if d, ok := s.Remembered(rule); !ok || d.Allowed {
		t.Fatalf("the limit's rejection not remembered: %+v", d)
	}
	lock := ratelimit.Rule{Name: "login_account", ID: "victim", Lockable: true}
	if d, err := s.AllowAll(t.Context(), lock); err != nil || !d.Allowed || d.FromMemory {
		t.Errorf("the lock alone of an identity at its limit, not locked: %+v, %v; want admitted, by Redis", d, err)
	}
}
