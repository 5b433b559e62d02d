package ratelimit_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
	"github.com/xcloak/xcloak/ratelimit/baseline"
)

const trials = 5

// burst starts n goroutines, releases them at once, and counts how many
// allow admits. Any error fails the test.
func burst(t *testing.T, n int, allow func(i int) (bool, error)) int {
	t.Helper()
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		admitted atomic.Int64
		errs     = make(chan error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			ok, err := allow(i)
			if err != nil {
				errs <- err
				return
			}
			if ok {
				admitted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("request failed: %v", err)
	}
	return int(admitted.Load())
}

// topUp asks allow one request at a time until one is rejected and returns
// how many it admitted (at most max+1). After a concurrent burst it shows
// what the burst left: a burst that admitted fewer than the limit must have
// left exactly the rest of the quota, so that burst plus top-up is exactly
// the limit, neither more nor less.
func topUp(t *testing.T, max int, allow func() (bool, error)) int {
	t.Helper()
	for n := 0; n <= max; n++ {
		ok, err := allow()
		if err != nil {
			t.Fatalf("top-up request %d: %v", n+1, err)
		}
		if !ok {
			return n
		}
	}
	return max + 1
}

// replicas returns two Limiters on two separate connections to the same
// Redis and prefix, standing for two XCloak processes.
func replicas(t *testing.T) (a, b *ratelimit.Limiter, rdb *redis.Client, prefix string) {
	t.Helper()
	rdb, prefix = testenv.Redis(t)
	other, _ := testenv.Redis(t)
	return newLimiter(t, rdb, prefix), newLimiter(t, other, prefix), rdb, prefix
}

func newLimiter(t testing.TB, rdb redis.UniversalClient, prefix string) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.NewLimiter(rdb, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestAllowExactUnderConcurrency(t *testing.T) {
	one, two, _, _ := replicas(t)
	for _, limit := range []int{1, 10, 100} {
		for _, n := range []int{10, 100, 1000} {
			want := min(limit, n)
			lim := ratelimit.Limit{Count: limit, Window: time.Minute}
			t.Run(fmt.Sprintf("limit=%d/requests=%d/one_client", limit, n), func(t *testing.T) {
				for trial := range trials {
					rule := ratelimit.Rule{Name: "login_account", ID: fmt.Sprintf("%s-%d", t.Name(), trial), Limit: lim}
					got := burst(t, n, func(int) (bool, error) {
						r, err := one.Allow(t.Context(), rule)
						return r.Allowed, err
					})
					if got != want {
						t.Errorf("trial %d: admitted %d, want exactly %d", trial, got, want)
					}
				}
			})
			t.Run(fmt.Sprintf("limit=%d/requests=%d/two_replicas", limit, n), func(t *testing.T) {
				for trial := range trials {
					rule := ratelimit.Rule{Name: "login_account", ID: fmt.Sprintf("%s-%d", t.Name(), trial), Limit: lim}
					got := burst(t, n, func(i int) (bool, error) {
						l := one
						if i%2 == 1 {
							l = two
						}
						r, err := l.Allow(t.Context(), rule)
						return r.Allowed, err
					})
					if got != want {
						t.Errorf("trial %d: admitted %d, want exactly %d", trial, got, want)
					}
				}
			})
		}
	}
}

// TestBaselineOverAdmits reproduces the seed's bug, so that the exactness
// test above is known to be able to fail.
func TestBaselineOverAdmits(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	naive := baseline.NewCheckThenAct(rdb)
	const limit = 10
	for _, n := range []int{100, 1000} {
		t.Run(fmt.Sprintf("requests=%d", n), func(t *testing.T) {
			// The race needs two checks to meet before either acts, which
			// a loaded machine can make rare in a small burst: up to 30
			// trials, stopping at the first over-admission.
			const most = 30
			worst := 0
			for trial := 0; trial < most && worst <= limit; trial++ {
				key := fmt.Sprintf("%snaive:%d:%d", prefix, n, trial)
				got := burst(t, n, func(int) (bool, error) {
					return naive.Allow(t.Context(), key, limit, time.Minute)
				})
				t.Logf("trial %d: baseline admitted %d of %d with limit %d", trial, got, n, limit)
				worst = max(worst, got)
			}
			if worst <= limit {
				t.Errorf("baseline admitted at most %d in %d trials; the check-then-act race should exceed %d", worst, most, limit)
			}
		})
	}
}

func TestAllowResult(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	rule := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.1", Limit: ratelimit.Limit{Count: 3, Window: time.Minute}}
	for i := 1; i <= 3; i++ {
		r, err := l.Allow(t.Context(), rule)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Allowed || r.Count != i || r.Remaining != 3-i || r.RetryAfter != 0 {
			t.Fatalf("request %d: got %+v, want allowed, count %d, remaining %d, no retry-after", i, r, i, 3-i)
		}
	}
	r, err := l.Allow(t.Context(), rule)
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed || r.Count != 3 || r.Remaining != 0 {
		t.Fatalf("4th request: got %+v, want rejected with count 3, remaining 0", r)
	}
	if r.RetryAfter <= 0 || r.RetryAfter > time.Minute {
		t.Fatalf("4th request: retry-after %v, want within (0, 1m]", r.RetryAfter)
	}
}

// logEntries returns the times, in microseconds of Redis' clock, that the
// log under key holds, oldest first; none if there is no key.
func logEntries(t *testing.T, rdb redis.Cmdable, key string) []int64 {
	t.Helper()
	raw, err := rdb.Get(t.Context(), key).Result()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ratelimit.DecodeLog(raw)
	if err != nil {
		t.Fatalf("log %q: %v", key, err)
	}
	return entries
}

// redisTime reads Redis' clock in microseconds.
func redisTime(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	now, err := rdb.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMicro()
}

// TestRetryAfterIsExact checks retry-after against the log itself: it must
// be the time until the oldest entry that has to leave does leave, measured
// on Redis' clock read just before and just after the decision.
func TestRetryAfterIsExact(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	window := 10 * time.Second
	rule := ratelimit.Rule{Name: "login_account", ID: "a@example.com", Limit: ratelimit.Limit{Count: 3, Window: window}}
	for range 3 {
		if _, err := l.Allow(t.Context(), rule); err != nil {
			t.Fatal(err)
		}
	}
	key, _ := ratelimit.NewKeys(prefix, "login_account")
	entries := logEntries(t, rdb, key.Log(rule.ID))
	if len(entries) != 3 {
		t.Fatalf("log holds %v, want 3 entries", entries)
	}
	oldest := entries[0]

	before := redisTime(t, rdb)
	r, err := l.Allow(t.Context(), rule)
	after := redisTime(t, rdb)
	if err != nil || r.Allowed {
		t.Fatalf("got %+v, %v; want a rejection", r, err)
	}
	got := r.RetryAfter.Microseconds()
	lo, hi := oldest+window.Microseconds()-after, oldest+window.Microseconds()-before
	if got < lo || got > hi || got <= 0 {
		t.Fatalf("retry-after %dµs, want within [%d, %d]µs and above zero", got, lo, hi)
	}
	d := ratelimit.Decision{RetryAfter: r.RetryAfter}
	if s := d.RetryAfterSeconds(); time.Duration(s)*time.Second < r.RetryAfter || s < 1 {
		t.Fatalf("RetryAfterSeconds %d rounds %v down", s, r.RetryAfter)
	}
}

// TestRetryAfterWhenLimitLowered: after a limit is lowered the log holds
// more entries than the new limit, and a slot frees only when all but
// limit-1 of them have left. Retry-after must wait for the youngest of
// those, not the oldest entry.
func TestRetryAfterWhenLimitLowered(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	window := 10 * time.Second
	rule := ratelimit.Rule{Name: "login_ip", ID: "203.0.113.9", Limit: ratelimit.Limit{Count: 5, Window: window}}
	for range 5 {
		if r, err := l.Allow(t.Context(), rule); err != nil || !r.Allowed {
			t.Fatalf("filling the log: %+v, %v", r, err)
		}
		time.Sleep(30 * time.Millisecond) // entries apart in time
	}
	key, _ := ratelimit.NewKeys(prefix, rule.Name)
	entries := logEntries(t, rdb, key.Log(rule.ID))
	if len(entries) != 5 {
		t.Fatalf("log holds %v, want 5 entries", entries)
	}
	rule.Limit.Count = 2 // lowered: 4 of the 5 entries must leave
	before := redisTime(t, rdb)
	r, err := l.Allow(t.Context(), rule)
	after := redisTime(t, rdb)
	if err != nil || r.Allowed {
		t.Fatalf("got %+v, %v; want a rejection", r, err)
	}
	leaves := entries[3] + window.Microseconds()
	if got := r.RetryAfter.Microseconds(); got < leaves-after || got > leaves-before {
		t.Fatalf("retry-after %dµs, want within [%d, %d]µs: until the 4th oldest entry leaves", got, leaves-after, leaves-before)
	}
}

// TestRetryAfterSecondsRoundsUp: the Retry-After header carries whole
// seconds, and a client that waits them must not be early.
func TestRetryAfterSecondsRoundsUp(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{time.Microsecond, 1}, {999 * time.Millisecond, 1}, {time.Second, 1},
		{time.Second + time.Microsecond, 2}, {1500 * time.Millisecond, 2}, {59*time.Second + 1, 60},
	} {
		if got := (ratelimit.Decision{RetryAfter: c.d}).RetryAfterSeconds(); got != c.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// TestWindowSlides uses a short window on Redis' clock. The only waits are
// the retry-afters the limiter itself returns: a retry after that long must
// be admitted, which is what "never early" means to a client.
func TestWindowSlides(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	window := 400 * time.Millisecond
	rule := ratelimit.Rule{Name: "login_ip", ID: "198.51.100.7", Limit: ratelimit.Limit{Count: 2, Window: window}}
	allow := func() ratelimit.Result {
		t.Helper()
		r, err := l.Allow(t.Context(), rule)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if !allow().Allowed {
		t.Fatal("first request rejected")
	}
	time.Sleep(window / 2)
	if !allow().Allowed {
		t.Fatal("second request rejected")
	}
	// A stall of the machine past an entry's departure admits a request
	// that was meant to be rejected; the log is then full again, so the
	// next round is checked instead. Three rounds must be checked.
	checked := 0
	for round := 0; checked < 3; round++ {
		if round == 20 {
			t.Fatalf("only %d of 3 rounds checked in %d: the machine stalled every time", checked, round)
		}
		r := allow()
		if r.Allowed {
			continue
		}
		if r.RetryAfter <= 0 || r.RetryAfter > window {
			t.Fatalf("round %d: retry-after %v, want within (0, %v]", round, r.RetryAfter, window)
		}
		time.Sleep(r.RetryAfter)
		if got := allow(); !got.Allowed {
			t.Fatalf("round %d: rejected after waiting the retry-after %v: %+v", round, r.RetryAfter, got)
		}
		checked++
	}
	key, _ := ratelimit.NewKeys(prefix, "login_ip")
	if n := len(logEntries(t, rdb, key.Log(rule.ID))); n > 2 {
		t.Fatalf("log holds %d entries, want at most the limit 2: old entries must leave", n)
	}
}

// TestKeysExpireAndRejectsWriteNothing checks the two storage promises:
// every key has a TTL of at most one window, and a rejection leaves the key
// byte for byte as it was.
func TestKeysExpireAndRejectsWriteNothing(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	windows := map[string]time.Duration{"login_ip": 10 * time.Minute, "login_account": 10 * time.Minute, "reset_account": time.Hour}
	for name, window := range windows {
		for id := range 5 {
			rule := ratelimit.Rule{Name: name, ID: strconv.Itoa(id), Limit: ratelimit.Limit{Count: 3, Window: window}}
			for range 5 {
				if _, err := l.Allow(t.Context(), rule); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	keys, err := rdb.Keys(t.Context(), prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 15 {
		t.Fatalf("limiter created %d keys %q, want 15 (one per rule and identity, nothing else)", len(keys), keys)
	}
	for _, k := range keys {
		ttl, err := rdb.PTTL(t.Context(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		name := k[len(prefix)+1:]
		name = name[:strings.IndexByte(name, ':')]
		// A log expires after its newest entry's end, rounded up to Redis's
		// millisecond so that it never expires before it, and at most an
		// eighth of a window later (sliding_window.lua sets an expiry
		// with that much to spare, so that the next admissions need not
		// move it).
		if most := windows[name] + windows[name]/8 + time.Millisecond; ttl <= 0 || ttl > most {
			t.Errorf("key %q: TTL %v, want within (0, %v]", k, ttl, most)
		}
	}

	rule := ratelimit.Rule{Name: "login_ip", ID: "0", Limit: ratelimit.Limit{Count: 3, Window: 10 * time.Minute}}
	kb, _ := ratelimit.NewKeys(prefix, "login_ip")
	key := kb.Log(rule.ID)
	before, err := rdb.Dump(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	ttlBefore := rdb.PTTL(t.Context(), key).Val()
	for range 10 {
		if r, err := l.Allow(t.Context(), rule); err != nil || r.Allowed {
			t.Fatalf("got %+v, %v; want a rejection", r, err)
		}
	}
	after, err := rdb.Dump(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Error("a rejected request changed the key's contents")
	}
	if ttlAfter := rdb.PTTL(t.Context(), key).Val(); ttlAfter > ttlBefore {
		t.Errorf("a rejected request extended the TTL from %v to %v", ttlBefore, ttlAfter)
	}
}

// TestAllowAllRejectedConsumesNothing pins the documented choice: a request
// rejected by one rule leaves no entry in the rules that admitted it.
func TestAllowAllRejectedConsumesNothing(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	ipLimit := ratelimit.Limit{Count: 3, Window: time.Minute}
	acctLimit := ratelimit.Limit{Count: 5, Window: time.Minute}
	rules := func(ip, account string) []ratelimit.Rule {
		return []ratelimit.Rule{
			{Name: "login_ip", ID: ip, Limit: ipLimit},
			{Name: "login_account", ID: account, Limit: acctLimit},
		}
	}
	count := func(name, id string) int64 {
		k, _ := ratelimit.NewKeys(prefix, name)
		return int64(len(logEntries(t, rdb, k.Log(id))))
	}

	// The address uses up its quota on three accounts.
	for _, acct := range []string{"a", "b", "c"} {
		d, err := l.AllowAll(t.Context(), rules("192.0.2.1", acct)...)
		if err != nil || !d.Allowed {
			t.Fatalf("account %s: got %+v, %v; want admitted", acct, d, err)
		}
	}
	// Now it is blocked; its attempts on the victim must not drain the
	// victim's account quota.
	for range 10 {
		d, err := l.AllowAll(t.Context(), rules("192.0.2.1", "victim")...)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			t.Fatal("request past the address limit admitted")
		}
		if rej := d.Rejected(); len(rej) != 1 || rej[0].Name != "login_ip" {
			t.Fatalf("rejected by %+v, want only login_ip", rej)
		}
		if d.RetryAfter <= 0 {
			t.Fatalf("retry-after %v, want > 0", d.RetryAfter)
		}
		if r := d.Results[1]; !r.Allowed || r.Count != 0 || r.Remaining != acctLimit.Count {
			t.Fatalf("victim rule result %+v: want allowed on its own, count 0, remaining %d", r, acctLimit.Count)
		}
	}
	if n := count("login_account", "victim"); n != 0 {
		t.Fatalf("victim's account log holds %d entries after only rejected requests, want 0", n)
	}
	// And the other way round: requests rejected by the account rule do not
	// use up the address's quota.
	for i := range 5 {
		if d, err := l.AllowAll(t.Context(), rules(fmt.Sprintf("203.0.113.%d", i), "busy")...); err != nil || !d.Allowed {
			t.Fatalf("got %+v, %v; want admitted", d, err)
		}
	}
	for range 5 {
		d, err := l.AllowAll(t.Context(), rules("198.51.100.1", "busy")...)
		if err != nil || d.Allowed {
			t.Fatalf("got %+v, %v; want rejected by the account rule", d, err)
		}
	}
	if n := count("login_ip", "198.51.100.1"); n != 0 {
		t.Fatalf("address log holds %d entries after only rejected requests, want 0", n)
	}
}

// TestAllowAllExactUnderConcurrency fires requests that share one address
// and one account at both rules: no rule ever admits past its limit, the
// decision admits at most the smaller limit, and the logs hold exactly the
// admitted requests (everything rejected was taken back).
func TestAllowAllExactUnderConcurrency(t *testing.T) {
	one, two, rdb, prefix := replicas(t)
	for _, n := range []int{100, 1000} {
		for trial := range trials {
			ip, acct := fmt.Sprintf("ip-%d-%d", n, trial), fmt.Sprintf("acct-%d-%d", n, trial)
			rules := []ratelimit.Rule{
				{Name: "login_ip", ID: ip, Limit: ratelimit.Limit{Count: 50, Window: time.Minute}},
				{Name: "login_account", ID: acct, Limit: ratelimit.Limit{Count: 10, Window: time.Minute}},
			}
			got := burst(t, n, func(i int) (bool, error) {
				l := one
				if i%2 == 1 {
					l = two
				}
				d, err := l.AllowAll(t.Context(), rules...)
				return d.Allowed, err
			})
			// One script decides both rules, all or none: no request
			// is turned away by another's entry.
			if got != 10 {
				t.Errorf("requests=%d trial %d: admitted %d, want exactly 10", n, trial, got)
			}
			for _, r := range rules {
				k, _ := ratelimit.NewKeys(prefix, r.Name)
				if c := len(logEntries(t, rdb, k.Log(r.ID))); c != got {
					t.Errorf("requests=%d trial %d: rule %s holds %d entries, want the %d admitted", n, trial, r.Name, c, got)
				}
			}
			more := topUp(t, 10, func() (bool, error) {
				d, err := one.AllowAll(t.Context(), rules...)
				return d.Allowed, err
			})
			if more != 0 {
				t.Errorf("requests=%d trial %d: burst admitted %d and %d more after it, want none after it", n, trial, got, more)
			}
			t.Logf("requests=%d trial %d: admitted %d, then %d", n, trial, got, more)
		}
	}
}

// TestRecoversFromScriptFlush stands for a Redis restart or failover that
// lost the script cache: the next decision reloads the script.
func TestRecoversFromScriptFlush(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	lim := ratelimit.Limit{Count: 2, Window: time.Minute}
	rules := []ratelimit.Rule{{Name: "login_ip", ID: "x", Limit: lim}, {Name: "login_account", ID: "y", Limit: lim}}
	for i := range 3 {
		if err := rdb.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		d, err := l.AllowAll(t.Context(), rules...)
		if err != nil {
			t.Fatalf("after SCRIPT FLUSH: %v", err)
		}
		if want := i < 2; d.Allowed != want {
			t.Fatalf("request %d: allowed %v, want %v", i, d.Allowed, want)
		}
		if err := rdb.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Allow(t.Context(), ratelimit.Rule{Name: "single", ID: "z", Limit: lim}); err != nil {
			t.Fatalf("single rule after SCRIPT FLUSH: %v", err)
		}
	}
}

func TestReset(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	rule := ratelimit.Rule{Name: "reset_account", ID: "a@example.com", Limit: ratelimit.Limit{Count: 1, Window: time.Hour}}
	if r, _ := l.Allow(t.Context(), rule); !r.Allowed {
		t.Fatal("first request rejected")
	}
	if r, _ := l.Allow(t.Context(), rule); r.Allowed {
		t.Fatal("second request admitted")
	}
	if err := l.Reset(t.Context(), rule.Name, rule.ID); err != nil {
		t.Fatal(err)
	}
	if r, _ := l.Allow(t.Context(), rule); !r.Allowed {
		t.Fatal("request after Reset rejected")
	}
}

func TestInvalidInput(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	if _, err := ratelimit.NewLimiter(rdb, "bad{prefix"); err == nil {
		t.Error("NewLimiter accepted a prefix with '{'")
	}
	l := newLimiter(t, rdb, prefix)
	ok := ratelimit.Limit{Count: 1, Window: time.Second}
	for _, tc := range []struct {
		name  string
		rules []ratelimit.Rule
	}{
		{"no rules", nil},
		{"empty name", []ratelimit.Rule{{Name: "", ID: "x", Limit: ok}}},
		{"name with brace", []ratelimit.Rule{{Name: "a}b", ID: "x", Limit: ok}}},
		{"upper-case name", []ratelimit.Rule{{Name: "Login", ID: "x", Limit: ok}}},
		{"zero count", []ratelimit.Rule{{Name: "a", ID: "x", Limit: ratelimit.Limit{Count: 0, Window: time.Second}}}},
		{"zero window", []ratelimit.Rule{{Name: "a", ID: "x", Limit: ratelimit.Limit{Count: 1}}}},
		{"second rule bad", []ratelimit.Rule{{Name: "a", ID: "x", Limit: ok}, {Name: "b", ID: "x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := l.AllowAll(t.Context(), tc.rules...); err == nil {
				t.Error("no error")
			}
		})
	}
	if keys := rdb.Keys(context.Background(), prefix+"*").Val(); len(keys) != 0 {
		t.Errorf("invalid requests wrote keys %q", keys)
	}
}

// TestPackedLogRewrites plants logs that Redis only reaches after years
// or a change of settings, and checks that the next admission rewrites
// them without losing or moving an entry: a base the new entry has
// outgrown, and entries wider than the window needs.
func TestPackedLogRewrites(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	k, _ := ratelimit.NewKeys(prefix, "login_ip")
	for _, c := range []struct {
		name  string
		width int
		// base returns the planted log's base, given Redis' time now.
		base func(now int64) int64
	}{
		// Every later entry is 2^32 µs or more past the base: no longer
		// fits in the 4 bytes of a ten-minute window's entries.
		{"outgrown base", 4, func(now int64) int64 { return now - 1<<32 }},
		{"wider entries", 6, func(now int64) int64 { return now - 5*int64(time.Second/time.Microsecond) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			rule := ratelimit.Rule{Name: "login_ip", ID: c.name, Limit: ratelimit.Limit{Count: 4, Window: 10 * time.Minute}}
			now := redisTime(t, rdb)
			second := int64(time.Second / time.Microsecond)
			dead := now - 11*60*second // left the window a minute ago
			planted := []int64{dead, now - 2*second, now - second}
			base := min(c.base(now), dead)
			if err := rdb.Set(t.Context(), k.Log(rule.ID), ratelimit.EncodeLog(c.width, base, planted...), time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			r, err := l.Allow(t.Context(), rule)
			if err != nil || !r.Allowed || r.Count != 3 {
				t.Fatalf("admission beside 2 live planted entries: %+v, %v; want admitted as the third", r, err)
			}
			raw := rdb.Get(t.Context(), k.Log(rule.ID)).Val()
			got := logEntries(t, rdb, k.Log(rule.ID))
			if raw[0] != 4 || len(got) != 3 || got[0] != planted[1] || got[1] != planted[2] || got[2] < now {
				t.Fatalf("log after the admission: width %d, entries %v; want width 4 and %v then one at %d or later", raw[0], got, planted[1:], now)
			}
			if r, err := l.Allow(t.Context(), rule); err != nil || !r.Allowed || r.Count != 4 {
				t.Fatalf("the next admission: %+v, %v; want admitted as the fourth", r, err)
			}
			if r, err := l.Allow(t.Context(), rule); err != nil || r.Allowed || r.RetryAfter > 10*time.Minute-time.Second {
				t.Fatalf("past the limit: %+v, %v; want a rejection until the oldest planted entry leaves", r, err)
			}
		})
	}
}

// TestPackedLogCutInPlace: a log whose key's expiry already covers the
// next admission (one written again within the eighth of a window its
// expiry was moved past the need) is written without moving the expiry:
// its dead front cut, every live entry kept. One live entry lost there
// would admit one request more than the limit.
func TestPackedLogCutInPlace(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	k, _ := ratelimit.NewKeys(prefix, "login_ip")
	const window = 10 * time.Minute
	rule := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.1", Limit: ratelimit.Limit{Count: 4, Window: window}}
	now := redisTime(t, rdb)
	second := int64(time.Second / time.Microsecond)
	dead := now - 11*60*second // left the window a minute ago
	planted := []int64{dead, now - 2*second, now - second}
	// The key lasts, and its header says so, well past what the admission
	// needs: the admission keeps it.
	expiry := now/1000 + 2*window.Milliseconds()
	if err := rdb.Set(t.Context(), k.Log(rule.ID), ratelimit.EncodeLogExpiring(4, dead, expiry, planted...), 2*window).Err(); err != nil {
		t.Fatal(err)
	}
	if r, err := l.Allow(t.Context(), rule); err != nil || !r.Allowed || r.Count != 3 {
		t.Fatalf("admission beside 2 live planted entries: %+v, %v; want admitted as the third", r, err)
	}
	raw := rdb.Get(t.Context(), k.Log(rule.ID)).Val()
	if got, err := ratelimit.LogExpiry(raw); err != nil || got != expiry {
		t.Fatalf("header expiry after the admission: %d, %v; want %d kept (the value written alone)", got, err, expiry)
	}
	if got := logEntries(t, rdb, k.Log(rule.ID)); len(got) != 3 || got[0] != planted[1] || got[1] != planted[2] || got[2] < now {
		t.Fatalf("log after the admission: %v; want %v then one at %d or later", got, planted[1:], now)
	}
	if r, err := l.Allow(t.Context(), rule); err != nil || !r.Allowed || r.Count != 4 {
		t.Fatalf("the next admission: %+v, %v; want admitted as the fourth", r, err)
	}
	if r, err := l.Allow(t.Context(), rule); err != nil || r.Allowed {
		t.Fatalf("past the limit: %+v, %v; want rejected", r, err)
	}
}

// TestPackedLogMalformed: a value under a log's key that is no packed log
// (written by hand, or by something else under the prefix) is an error,
// never a guess at what it holds.
func TestPackedLogMalformed(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	k, _ := ratelimit.NewKeys(prefix, "login_ip")
	for _, v := range []string{"", "x", "\x04short", "\x07" + strings.Repeat("a", 15), "\x04" + strings.Repeat("a", 10)} {
		rule := ratelimit.Rule{Name: "login_ip", ID: v, Limit: ratelimit.PerMinute(5)}
		if err := rdb.Set(t.Context(), k.Log(rule.ID), v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if r, err := l.Allow(t.Context(), rule); err == nil {
			t.Errorf("log %q: %+v; want an error", v, r)
		}
	}
}

// TestPackedLogCenturiesAhead: a log whose base puts its entries centuries
// ahead of Redis' clock (a header garbled, or written by hand) would make
// the wait for its oldest entry longer than a time.Duration holds. It is
// an error, as any log the script cannot have written, never a rejection
// whose retry-after wrapped around to a negative time (which the decision,
// taking the longest of its rules', reports as none).
func TestPackedLogCenturiesAhead(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	k, _ := ratelimit.NewKeys(prefix, "login_ip")
	rule := ratelimit.Rule{Name: "login_ip", ID: "centuries", Limit: ratelimit.PerMinute(2)}
	base := int64(1) << 55 // about a thousand years from the epoch
	if err := rdb.Set(t.Context(), k.Log(rule.ID), ratelimit.EncodeLog(4, base, base, base+1), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	for _, rules := range [][]ratelimit.Rule{{rule}, {rule, {Name: "login_account", ID: "c@example.com", Limit: ratelimit.PerMinute(2)}}} {
		d, err := l.AllowAll(t.Context(), rules...)
		if err == nil {
			t.Errorf("%d rules: %+v; want an error", len(rules), d)
		}
	}
}

// TestAllowAllSameRuleTwice: a rule named twice in one request counts it
// twice, as the in-process store does; both see the log as it was.
func TestAllowAllSameRuleTwice(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	rule := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.1", Limit: ratelimit.PerMinute(3)}
	d, err := l.AllowAll(t.Context(), rule, rule)
	if err != nil || !d.Allowed || d.Results[0].Count != 1 || d.Results[1].Count != 1 {
		t.Fatalf("first request naming the rule twice: %+v, %v", d, err)
	}
	k, _ := ratelimit.NewKeys(prefix, "login_ip")
	if n := len(logEntries(t, rdb, k.Log(rule.ID))); n != 2 {
		t.Fatalf("log holds %d entries, want 2", n)
	}
	if d, err := l.AllowAll(t.Context(), rule, rule); err != nil || !d.Allowed {
		t.Fatalf("second request: %+v, %v; want admitted on the 2 of 3 it saw", d, err)
	}
	if d, err := l.AllowAll(t.Context(), rule); err != nil || d.Allowed || d.Results[0].Count != 4 {
		t.Fatalf("third request: %+v, %v; want rejected at 4", d, err)
	}
}

// TestLogOutlivesItsNewestEntry: a log's key expires no earlier than its
// newest entry leaves the window. A key gone even a millisecond early takes
// with it the entries still live in that millisecond, and a burst then
// admitted passes the limit. Checked on Redis' own record of the expiry
// (PEXPIRETIME), not by waiting. The expiry is also at most an eighth of a
// window (and a millisecond) later than needed, and the log's header
// records it exactly: admissions that find it far enough keep it, trusting
// the header.
func TestLogOutlivesItsNewestEntry(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	k, _ := ratelimit.NewKeys(prefix, "login_ip")
	for i, window := range []time.Duration{time.Millisecond, 1500 * time.Microsecond, time.Minute, ratelimit.MaxWindow} {
		rule := ratelimit.Rule{Name: "login_ip", ID: fmt.Sprint("expiry", i), Limit: ratelimit.Limit{Count: 100, Window: window}}
		for range trials {
			if r, err := l.Allow(t.Context(), rule); err != nil || !r.Allowed {
				t.Fatalf("window %s: %+v, %v", window, r, err)
			}
			// The value and its expiry in one transaction: a window of a
			// millisecond may pass between two reads, and the key with it.
			key := k.Log(rule.ID)
			var expiry *redis.DurationCmd
			var value *redis.StringCmd
			if _, err := rdb.TxPipelined(t.Context(), func(p redis.Pipeliner) error {
				expiry, value = p.PExpireTime(t.Context(), key), p.Get(t.Context(), key)
				return nil
			}); err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			if value.Err() == redis.Nil {
				continue // a window of a millisecond may already have passed
			}
			raw, ms := value.Val(), expiry.Val()
			entries, err := ratelimit.DecodeLog(raw)
			if err != nil || len(entries) == 0 {
				t.Fatalf("window %s: log %q: %v, %d entries", window, raw, err, len(entries))
			}
			newest := entries[len(entries)-1]
			expires := int64(ms/time.Millisecond) * 1000
			if leaves := newest + window.Microseconds(); expires < leaves {
				t.Fatalf("window %s: key expires at %d µs, before its newest entry leaves at %d µs", window, expires, leaves)
			}
			if most := newest + (window + window/8 + time.Millisecond).Microseconds(); expires > most {
				t.Fatalf("window %s: key expires at %d µs, after %d µs, an eighth of a window after its newest entry leaves", window, expires, most)
			}
			recorded, err := ratelimit.LogExpiry(raw)
			if err != nil || recorded != int64(ms/time.Millisecond) {
				t.Fatalf("window %s: header records expiry %d ms (%v), key expires at %d ms", window, recorded, err, ms/time.Millisecond)
			}
		}
	}
}

// TestPackedLogAfterClockStepsBack: should Redis' clock step back (a
// failover to a host whose clock is behind), a log holds entries later
// than now, further apart than the window's entries are wide. Rewriting
// it must keep every entry and its order, never wrap an entry's offset
// around its width.
func TestPackedLogAfterClockStepsBack(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	k, _ := ratelimit.NewKeys(prefix, "login_ip")
	rule := ratelimit.Rule{Name: "login_ip", ID: "stepped back", Limit: ratelimit.Limit{Count: 4, Window: 10 * time.Minute}}
	now := redisTime(t, rdb)
	hour := int64(time.Hour / time.Microsecond)
	// Written 1 and 3 hours ahead of the clock now, in 6-byte entries.
	planted := []int64{now + hour, now + 3*hour}
	if err := rdb.Set(t.Context(), k.Log(rule.ID), ratelimit.EncodeLog(6, planted[0], planted...), 4*time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := l.Allow(t.Context(), rule)
	if err != nil || !r.Allowed || r.Count != 3 {
		t.Fatalf("admission beside 2 entries ahead of the clock: %+v, %v; want admitted as the third", r, err)
	}
	got := logEntries(t, rdb, k.Log(rule.ID))
	if len(got) != 3 || got[0] != planted[0] || got[1] != planted[1] || got[2] != planted[1] {
		t.Fatalf("log after the admission: %v; want %v then %d (never before the newest)", got, planted, planted[1])
	}
}

// TestLongLogAppended: a long log (a generous limit) is appended to while
// most of it is live, and cut once its dead front is half of it. Either
// way the count is exact, the entries stay in order, the log holds at most
// twice its live entries, and its key lasts until the newest leaves.
func TestLongLogAppended(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	k, _ := ratelimit.NewKeys(prefix, "login_password")
	limit := ratelimit.Limit{Count: 1000, Window: 10 * time.Minute}
	second := int64(time.Second / time.Microsecond)
	for _, c := range []struct {
		name       string
		dead, live int
	}{
		{"mostly live", 10, 300},
		{"half dead", 200, 200},
		{"mostly dead", 300, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			rule := ratelimit.Rule{Name: "login_password", ID: c.name, Limit: limit}
			now := redisTime(t, rdb)
			var planted []int64
			for i := range c.dead {
				planted = append(planted, now-11*60*second+int64(i))
			}
			for i := range c.live {
				planted = append(planted, now-int64(c.live-i)*1000)
			}
			key := k.Log(rule.ID)
			if err := rdb.Set(t.Context(), key, ratelimit.EncodeLog(4, planted[0], planted...), time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			for n := range 3 {
				r, err := l.Allow(t.Context(), rule)
				if err != nil || !r.Allowed || r.Count != c.live+n+1 {
					t.Fatalf("admission %d beside %d live entries: %+v, %v; want admitted as %d", n+1, c.live, r, err, c.live+n+1)
				}
			}
			got := logEntries(t, rdb, key)
			live := 0
			for i, e := range got {
				if i > 0 && e < got[i-1] {
					t.Fatalf("entry %d (%d) before entry %d (%d)", i, e, i-1, got[i-1])
				}
				if e > now-limit.Window.Microseconds() {
					live++
				}
			}
			if live != c.live+3 || len(got) > 2*live {
				t.Fatalf("log of %d entries, %d live; want %d live and at most twice that", len(got), live, c.live+3)
			}
			ms, err := rdb.PExpireTime(t.Context(), key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if newest := got[len(got)-1]; int64(ms/time.Millisecond)*1000 < newest+limit.Window.Microseconds() {
				t.Fatalf("key expires at %d ms, before its newest entry leaves at %d µs", ms/time.Millisecond, newest+limit.Window.Microseconds())
			}
		})
	}
}

// TestDecisionAllocations checks that what the limiter itself does per
// decision (keys, arguments, reading the reply) allocates less than
// redis_rate's whole Allow, on the same client: one rule, and the four
// rules of an IPv4 sign-in with a password, admitted and rejected. The
// client's own allocations are in both, so the comparison does not depend
// on go-redis' version.
func TestDecisionAllocations(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	gcra := redis_rate.NewLimiter(rdb)
	ctx := context.Background()
	limit := ratelimit.PerMinute(10)
	n := 0
	fresh := func() string { n++; return strconv.Itoa(n) }
	allocs := func(name string, f func(id string) error, id func() string) float64 {
		t.Helper()
		// Once first, so that the connection is open and the script loaded.
		if err := f(id()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var err error
		got := testing.AllocsPerRun(200, func() {
			if e := f(id()); e != nil {
				err = e
			}
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return got
	}
	same := func() string { return "same" }
	want := allocs("redis_rate", func(id string) error {
		_, err := gcra.Allow(ctx, prefix+"gcra:"+id, redis_rate.PerMinute(limit.Count))
		return err
	}, fresh)
	allow := func(id string) error {
		_, err := l.Allow(ctx, ratelimit.Rule{Name: "one", ID: id, Limit: limit})
		return err
	}
	signIn := func(id string) error {
		_, err := l.AllowAll(ctx,
			ratelimit.Rule{Name: "ip", ID: id, Limit: limit},
			ratelimit.Rule{Name: "network", ID: id, Limit: limit},
			ratelimit.Rule{Name: "account", ID: id, Limit: limit, Lockable: true},
			ratelimit.Rule{Name: "password", ID: id, Limit: limit, Lockable: true})
		return err
	}
	for _, c := range []struct {
		name string
		f    func(id string) error
		id   func() string
	}{
		{"allow/admitted", allow, fresh},
		{"allow/rejected", allow, same},
		{"signin/admitted", signIn, fresh},
		{"signin/rejected", signIn, same},
	} {
		got := allocs(c.name, c.f, c.id)
		if got >= want {
			t.Errorf("%s: %v allocations per decision, want fewer than redis_rate's %v", c.name, got, want)
		}
		t.Logf("%s: %v allocations per decision (redis_rate's %v)", c.name, got, want)
	}
}
