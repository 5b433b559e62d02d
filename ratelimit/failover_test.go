package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

func newLocal(t *testing.T) *ratelimit.Local {
	t.Helper()
	l, err := ratelimit.NewLocal(policies, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLocalExactUnderConcurrency(t *testing.T) {
	l := newLocal(t)
	for _, limit := range []int{1, 10, 100} {
		for _, n := range []int{10, 100, 1000} {
			rules := []ratelimit.Rule{
				{Name: "login_ip", ID: fmt.Sprint("ip", limit, n), Limit: ratelimit.Limit{Count: limit * 2, Window: time.Minute}},
				{Name: "login_account", ID: fmt.Sprint("acct", limit, n), Limit: ratelimit.Limit{Count: limit, Window: time.Minute}},
			}
			got := burst(t, n, func(int) (bool, error) {
				d, err := l.AllowAll(t.Context(), rules...)
				return d.Allowed, err
			})
			if want := min(limit, n); got != want {
				t.Errorf("limit %d, %d requests: admitted %d, want %d", limit, n, got, want)
			}
			// All or nothing: the address rule (twice the limit, so it
			// never rejected) counted only the admitted requests.
			d, _ := l.AllowAll(t.Context(), ratelimit.Rule{Name: "login_ip", ID: rules[0].ID, Limit: rules[0].Limit})
			if !d.Allowed || d.Results[0].Count != got+1 {
				t.Errorf("address rule: %+v, want it to hold the %d admitted plus this one", d.Results[0], got)
			}
		}
	}
}

func TestLocalSlidesAndLocks(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l, err := ratelimit.NewLocal(policies, 0, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	rule := ratelimit.Rule{Name: "login_account", ID: "a", Limit: ratelimit.Limit{Count: 2, Window: time.Minute}, Lockable: true}
	allow := func() ratelimit.Decision {
		d, err := l.AllowAll(t.Context(), rule)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	allow()
	now = now.Add(30 * time.Second)
	allow()
	if d := allow(); d.Allowed || d.RetryAfter != 30*time.Second {
		t.Fatalf("third request: %+v, want rejected with retry-after 30s", d)
	}
	now = now.Add(30 * time.Second)
	if d := allow(); !d.Allowed {
		t.Fatalf("after the first entry left: %+v", d)
	}
	for i := range policy.Threshold {
		f, _ := l.Fail(t.Context(), "login_account", "a", "")
		if f.LockedNow != (i == policy.Threshold-1) {
			t.Fatalf("failure %d: %+v", i+1, f)
		}
	}
	now = now.Add(2 * time.Minute)
	if d := allow(); d.Allowed || !d.Results[0].Locked || d.RetryAfter != policy.Duration-2*time.Minute {
		t.Fatalf("while locked: %+v", d)
	}
	if was, _ := l.Clear(t.Context(), "login_account", "a"); !was {
		t.Fatal("Clear did not report the lock")
	}
	for range policy.Threshold {
		l.Fail(t.Context(), "login_account", "a", "")
	}
	if d := allow(); d.RetryAfter != 2*policy.Duration {
		t.Fatalf("second lock: retry-after %v, want %v (escalated)", d.RetryAfter, 2*policy.Duration)
	}
}

// fastClient gives up on a dead Redis at once, as the server's client
// does: it sends nothing again (MaxRetries -1). A stopped test server
// refuses connections, so the timeouts are not what makes it quick; they
// are seconds so that a live Redis answering late on a loaded machine is
// not taken for one gone.
func fastClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.MaxRetries = 2*time.Second, 2*time.Second, 2*time.Second, -1
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func newFailover(t *testing.T, rdb redis.UniversalClient, p ratelimit.FailurePolicy) *ratelimit.Failover {
	t.Helper()
	return failoverOn(t, rdb, "xcloak:", p)
}

// failoverOn is a Failover with policy p in front of rdb's keys under
// prefix, and the in-process store, closed when t ends.
func failoverOn(t *testing.T, rdb redis.UniversalClient, prefix string, p ratelimit.FailurePolicy) *ratelimit.Failover {
	t.Helper()
	shared, err := ratelimit.NewRedisStore(rdb, prefix, policies)
	if err != nil {
		t.Fatal(err)
	}
	f := ratelimit.NewFailover(shared, newLocal(t), rdb, p, nil)
	t.Cleanup(f.Close)
	return f
}

// waitRecovered waits, within a generous bound, for the probe to find
// Redis again.
func waitRecovered(t *testing.T, f *ratelimit.Failover) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for f.Degraded() {
		if time.Now().After(deadline) {
			t.Fatal("still degraded 20s after Redis came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFailoverPolicies kills and restarts a real Redis under each policy.
func TestFailoverPolicies(t *testing.T) {
	limit := ratelimit.Limit{Count: 3, Window: time.Minute}
	for _, p := range []ratelimit.FailurePolicy{ratelimit.FailLocal, ratelimit.FailClosed, ratelimit.FailOpen} {
		t.Run(string(p), func(t *testing.T) {
			srv := testenv.PrivateRedis(t)
			rdb := fastClient(t, srv.URL())
			f := newFailover(t, rdb, p)
			rule := ratelimit.Rule{Name: "login_account", ID: "victim", Limit: limit, Lockable: true}
			admitted := func(n int) (int, error) {
				got := 0
				for range n {
					d, err := f.AllowAll(t.Context(), rule)
					if err != nil {
						return got, err
					}
					if d.Allowed {
						got++
					}
				}
				return got, nil
			}
			if got, err := admitted(5); err != nil || got != 3 || f.Degraded() {
				t.Fatalf("with Redis up: admitted %d (%v), degraded %v; want 3", got, err, f.Degraded())
			}

			srv.Stop()
			got, err := admitted(10)
			if !f.Degraded() {
				t.Fatal("not degraded with Redis down")
			}
			switch p {
			case ratelimit.FailLocal:
				if err != nil || got != 3 {
					t.Fatalf("local policy: admitted %d (%v), want the limit 3 held in process", got, err)
				}
			case ratelimit.FailClosed:
				if !errors.Is(err, ratelimit.ErrRedisUnavailable) || got != 0 {
					t.Fatalf("closed policy: admitted %d, err %v; want ErrRedisUnavailable", got, err)
				}
			case ratelimit.FailOpen:
				if err != nil || got != 10 {
					t.Fatalf("open policy: admitted %d (%v), want all 10", got, err)
				}
				// A failure counts nowhere, and does not read as a
				// lock already there (Failures 0).
				if f, err := f.Fail(t.Context(), "login_account", "open-"+t.Name(), ""); err != nil || f.Failures == 0 || f.LockedNow {
					t.Fatalf("open policy: Fail = %+v, %v; want a failure that locks nothing", f, err)
				}
			}

			srv.Start() // a fresh Redis: no keys, no scripts (NOSCRIPT on first use)
			waitRecovered(t, f)
			if got, err := admitted(5); err != nil || got != 3 {
				t.Fatalf("after recovery: admitted %d (%v), want the limit 3 held again by Redis", got, err)
			}
			if n := rdb.DBSize(t.Context()).Val(); n == 0 {
				t.Fatal("after recovery the decisions did not reach Redis")
			}
		})
	}
}

func TestParseFailurePolicy(t *testing.T) {
	for _, s := range []string{"local", "closed", "open"} {
		if p, err := ratelimit.ParseFailurePolicy(s); err != nil || string(p) != s {
			t.Errorf("ParseFailurePolicy(%q) = %q, %v", s, p, err)
		}
	}
	for _, s := range []string{"", "Local", "fail-open", "none"} {
		if _, err := ratelimit.ParseFailurePolicy(s); err == nil {
			t.Errorf("ParseFailurePolicy(%q) accepted", s)
		}
	}
}

// TestFailedRestoreRefusesLockableRules: when the lockouts in force cannot
// be loaded at the start of an outage (Postgres busy), local decisions
// refuse lockable rules instead of admitting guesses at accounts Redis
// held locked, and the load is tried again until it works.
func TestFailedRestoreRefusesLockableRules(t *testing.T) {
	rdb := refusingRedis(t)
	f := newFailover(t, rdb, ratelimit.FailLocal)
	var calls atomic.Int64
	f.Restore = func(ctx context.Context) ([]ratelimit.HeldLock, error) {
		if calls.Add(1) == 1 {
			return nil, errors.New("postgres busy")
		}
		return []ratelimit.HeldLock{{Name: "login_account", ID: "victim@example.com", Until: time.Now().Add(time.Hour), Level: 3}}, nil
	}
	victim := ratelimit.Rule{Name: "login_account", ID: "victim@example.com", Limit: ratelimit.PerMinute(100), Lockable: true}
	network := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.1", Limit: ratelimit.PerMinute(100)}

	if d, err := f.AllowAll(t.Context(), network, victim); !errors.Is(err, ratelimit.ErrRedisUnavailable) {
		t.Fatalf("guess while the locks could not be loaded: %+v, %v; want ErrRedisUnavailable", d, err)
	}
	if d, err := f.AllowAll(t.Context(), network); err != nil || !d.Allowed {
		t.Fatalf("a rule that no lock concerns: %+v, %v; want admitted", d, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := f.AllowAll(t.Context(), network, victim)
		if err == nil {
			if d.Allowed || !d.Results[1].Locked {
				t.Fatalf("guess once the locks are loaded: %+v; want refused as locked", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the load was not tried again: %v after %d tries", err, calls.Load())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRestoreSkipsLocksOfUnknownRules: a lock in force of a rule the
// in-process store keeps no lockouts for is skipped; the others are loaded
// and lockable decisions go on, instead of being refused for the outage.
func TestRestoreSkipsLocksOfUnknownRules(t *testing.T) {
	rdb := refusingRedis(t)
	f := newFailover(t, rdb, ratelimit.FailLocal)
	f.Restore = func(ctx context.Context) ([]ratelimit.HeldLock, error) {
		return []ratelimit.HeldLock{
			{Name: "no_lockouts", ID: "x", Until: time.Now().Add(time.Hour), Level: 1},
			{Name: "login_account", ID: "victim@example.com", Until: time.Now().Add(time.Hour), Level: 1},
		}, nil
	}
	victim := ratelimit.Rule{Name: "login_account", ID: "victim@example.com", Limit: ratelimit.PerMinute(100), Lockable: true}
	other := ratelimit.Rule{Name: "login_account", ID: "owner@example.com", Limit: ratelimit.PerMinute(100), Lockable: true}
	if d, err := f.AllowAll(t.Context(), victim); err != nil || d.Allowed || !d.Results[0].Locked {
		t.Fatalf("guess at an account locked in force: %+v, %v; want refused as locked", d, err)
	}
	if d, err := f.AllowAll(t.Context(), other); err != nil || !d.Allowed {
		t.Fatalf("an account no lock concerns: %+v, %v; want admitted", d, err)
	}
}

// TestLocksOfAnOutageOutliveIt: an account locked in process while Redis
// was down (and recorded where Restore reads) is still locked once Redis
// is back, even if Redis came back empty.
func TestLocksOfAnOutageOutliveIt(t *testing.T) {
	srv := testenv.PrivateRedis(t)
	rdb := fastClient(t, srv.URL())
	f := newFailover(t, rdb, ratelimit.FailLocal)
	var recorded atomic.Pointer[[]ratelimit.HeldLock]
	recorded.Store(&[]ratelimit.HeldLock{})
	f.Restore = func(context.Context) ([]ratelimit.HeldLock, error) { return *recorded.Load(), nil }
	victim := ratelimit.Rule{Name: "login_account", ID: "victim@example.com", Limit: ratelimit.PerMinute(100), Lockable: true}

	srv.Stop()
	for {
		fl, err := f.Fail(t.Context(), victim.Name, victim.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if fl.LockedNow {
			// What the service writes to Postgres for the lock.
			recorded.Store(&[]ratelimit.HeldLock{{Name: victim.Name, ID: victim.ID, Until: time.Now().Add(fl.LockedFor), Level: fl.Level}})
			break
		}
	}
	if !f.Degraded() {
		t.Fatal("not degraded with Redis stopped")
	}
	srv.Start() // empty: the outage's lock is not in it
	waitRecovered(t, f)
	d, err := f.AllowAll(t.Context(), victim)
	if err != nil || d.Allowed || !d.Results[0].Locked || d.FromMemory {
		t.Fatalf("a guess once Redis is back: %+v, %v; want Redis to refuse it as locked", d, err)
	}
}

// TestRestartBetweenCallsPutsLocksBack: a Redis restarted without its data
// between two calls fails none of them (go-redis dials it again by
// itself), so no outage begins; the watch of its server process finds the
// new one, and the lockouts in force go back into it.
func TestRestartBetweenCallsPutsLocksBack(t *testing.T) {
	srv := testenv.PrivateRedis(t)
	rdb := fastClient(t, srv.URL())
	f := newFailover(t, rdb, ratelimit.FailLocal)
	victim := ratelimit.Rule{Name: "login_account", ID: "victim@example.com", Limit: ratelimit.PerMinute(100), Lockable: true}
	lock := lockAt(t, f, victim.Name, victim.ID)
	f.Restore = newLockLog(lock).restore // the lockout log has it
	looks := &infoCounter{}
	rdb.AddHook(looks)
	f.WatchRestarts(20 * time.Millisecond)
	looks.wait(t, 2) // the watch knows this server
	srv.Stop()
	srv.Start()
	// Asked by the lock alone, which admits nothing: asked by the rule,
	// the polls of a loaded machine would fill its log in the new server
	// before the lock is back, and be refused for that instead.
	lockOnly := ratelimit.Rule{Name: victim.Name, ID: victim.ID, Lockable: true}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d, err := f.AllowAll(t.Context(), lockOnly)
		if err == nil && !d.Allowed && d.Results[0].Locked && !f.Degraded() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a restart between two calls (degraded %v): %+v, %v; want refused as locked, by Redis", f.Degraded(), d.Results, err)
		}
	}
	if d, err := f.AllowAll(t.Context(), victim); err != nil || d.Allowed || !d.Results[0].Locked {
		t.Fatalf("the rule once the lock is back: %+v, %v; want refused as locked", d.Results, err)
	}
}

// infoCounter counts the INFO commands of a watch of restarts (INFO
// server replication) that a client it hooks has had answered.
type infoCounter struct{ n atomic.Int64 }

func (*infoCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (*infoCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (c *infoCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if fmt.Sprint(cmd.Args()) == "[info server replication]" && err == nil {
			c.n.Add(1)
		}
		return err
	}
}

// wait waits, within a generous bound, for n answered looks. The watch
// looks again only once it has taken in its last look: with n = 2, it
// knows the server the first look found, however slowly a loaded machine
// runs it.
func (c *infoCounter) wait(t *testing.T, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c.n.Load() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d looks of the watch after 10 s, want %d", c.n.Load(), n)
		}
	}
}
