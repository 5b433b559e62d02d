package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

// The conformance suite: one table of cases that every ratelimit.Store
// must pass, run unchanged against each store below: a single Redis, a
// Redis Cluster, the in-process Local, and the Failover that composes them. The cases know the
// contract only; what is particular to a store (making a fresh one,
// listing the keys it holds) is its harness's.

// storeUnderTest is a fresh store, isolated from every other, and what the
// suite may ask its harness about it.
type storeUnderTest struct {
	ratelimit.Store
	// expiries returns every key the store holds and the time each has
	// left (a negative time for a key that never expires). Nil for a store
	// whose memory is not kept in expiring keys.
	expiries func(t *testing.T) map[string]time.Duration
}

// storeHarness makes stores of one kind.
type storeHarness struct {
	name string
	// open returns a fresh store with the lockouts of policies.
	open func(t *testing.T, policies map[string]ratelimit.LockoutPolicy) storeUnderTest
}

var storeHarnesses = []storeHarness{
	{"redis", func(t *testing.T, policies map[string]ratelimit.LockoutPolicy) storeUnderTest {
		rdb, prefix := testenv.Redis(t)
		return redisStore(t, rdb, prefix, policies, func(ctx context.Context, each func(*redis.Client) error) error {
			return each(rdb)
		})
	}},
	{"cluster", func(t *testing.T, policies map[string]ratelimit.LockoutPolicy) storeUnderTest {
		rdb, prefix := testenv.RedisCluster(t)
		return redisStore(t, rdb, prefix, policies, func(ctx context.Context, each func(*redis.Client) error) error {
			return rdb.ForEachMaster(ctx, func(_ context.Context, node *redis.Client) error { return each(node) })
		})
	}},
	{"local", func(t *testing.T, policies map[string]ratelimit.LockoutPolicy) storeUnderTest {
		l, err := ratelimit.NewLocal(policies, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Local's memory is bounded by a count of identities, least
		// recently used forgotten first (TestLocalEvictsLeastRecentlyUsed),
		// not by time: an expired entry is ignored when read and reused,
		// never deleted on its own. So it has no expiries to list.
		return storeUnderTest{Store: l}
	}},
	// The Failover, with Redis up and with Redis gone under FailLocal, is
	// held to the same contract as the stores it composes.
	{"failover", func(t *testing.T, policies map[string]ratelimit.LockoutPolicy) storeUnderTest {
		rdb, prefix := testenv.Redis(t)
		shared := redisStore(t, rdb, prefix, policies, func(ctx context.Context, each func(*redis.Client) error) error {
			return each(rdb)
		})
		local, err := ratelimit.NewLocal(policies, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		f := ratelimit.NewFailover(shared.Store, local, rdb, ratelimit.FailLocal, nil)
		t.Cleanup(f.Close)
		return storeUnderTest{Store: f, expiries: shared.expiries}
	}},
	{"failover_degraded", func(t *testing.T, policies map[string]ratelimit.LockoutPolicy) storeUnderTest {
		rdb := refusingRedis(t)
		shared, err := ratelimit.NewRedisStore(rdb, "xcloak:", policies)
		if err != nil {
			t.Fatal(err)
		}
		local, err := ratelimit.NewLocal(policies, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		f := ratelimit.NewFailover(shared, local, rdb, ratelimit.FailLocal, nil)
		t.Cleanup(f.Close)
		if err := f.Check(t.Context()); err == nil || !f.Degraded() {
			t.Fatalf("Check of a Redis that refuses connections: %v, degraded %v; want degraded", err, f.Degraded())
		}
		// Decided by the Local store, which keeps no expiring keys.
		return storeUnderTest{Store: f}
	}},
}

// redisStore returns a RedisStore under prefix whose keys are listed on
// every node nodes visits.
func redisStore(t *testing.T, rdb redis.UniversalClient, prefix string, policies map[string]ratelimit.LockoutPolicy,
	nodes func(context.Context, func(*redis.Client) error) error) storeUnderTest {
	s, err := ratelimit.NewRedisStore(rdb, prefix, policies)
	if err != nil {
		t.Fatal(err)
	}
	return storeUnderTest{Store: s, expiries: func(t *testing.T) map[string]time.Duration {
		t.Helper()
		var mu sync.Mutex
		out := map[string]time.Duration{}
		err := nodes(t.Context(), func(node *redis.Client) error {
			keys, err := node.Keys(t.Context(), prefix+"*").Result()
			if err != nil {
				return err
			}
			for _, k := range keys {
				d, err := node.PTTL(t.Context(), k).Result()
				if err != nil {
					return err
				}
				if d == -2 { // expired between KEYS and PTTL
					continue
				}
				mu.Lock()
				out[k] = d
				mu.Unlock()
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}}
}

// storeCases are the conformance cases. Each gets a fresh store.
var storeCases = []struct {
	name string
	// policies are the lockouts the store is opened with; nil: suitePolicies.
	policies map[string]ratelimit.LockoutPolicy
	run      func(t *testing.T, s storeUnderTest)
}{
	{"exact admissions under concurrency", nil, caseExactUnderConcurrency},
	{"rejected request keeps no quota", nil, caseRejectedKeepsNoQuota},
	{"all or none under concurrency", nil, caseAllOrNoneUnderConcurrency},
	{"window slides", nil, caseWindowSlides},
	{"retry-after never early and never zero", nil, caseRetryAfter},
	{"a locked rule's retry-after waits for its log too", escalating, caseLockedRetryAfter},
	{"lockout at the threshold exactly once", nil, caseLockoutOnce},
	{"lockouts apart per rule name", nil, caseLockoutsPerRule},
	{"escalation and its cap", escalating, caseEscalation},
	{"unlock keeps the level", nil, caseUnlock},
	{"an unlock's level is remembered from the unlock", expiring, caseUnlockMemory},
	{"a lock that runs out is remembered from its end", expiring, caseRunOutMemory},
	{"hold only lengthens and raises", nil, caseHold},
	{"a lock held at a lower level keeps the higher", expiring, caseHoldKeepsTheLevel},
	{"a held lock starts the failures anew", nil, caseHeldLockCountsAnew},
	{"reset forgets a rule's log", nil, caseReset},
	{"remembered never admits nor records", nil, caseRemembered},
	{"a repeated attempt counts once", nil, caseRepeatedAttempt},
	{"a repeated attempt counts once under concurrency", nil, caseRepeatedAttemptConcurrent},
	{"attempts are forgotten by Clear", nil, caseAttemptsCleared},
	{"attempts are forgotten with the failures", expiring, caseAttemptsExpire},
	{"every key expires", expiring, caseExpiry},
	{"bad input is an error", nil, caseBadInput},
	{"a lock-only rule keeps no log", nil, caseLockOnly},
	{"a limit changed under concurrency", nil, caseLimitChangedUnderConcurrency},
	{"a log counts in the deciding rule's window", nil, caseWindowChanged},
	{"attempts in flight never pass the threshold", nil, caseAttemptsInFlight},
	{"an attempt in flight counts for its ttl", nil, caseAttemptsInFlightExpire},
	{"a shorter ttl never cuts an attempt in flight short", nil, caseAttemptsInFlightMixedTTL},
	{"attempts in flight: bad input is an error", nil, caseAttemptsBadInput},
	{"a repeated attempt takes no place", nil, caseRepeatedAttemptTakesNoPlace},
	{"places taken with the decision never pass the threshold", nil, casePlacesWithTheDecision},
	{"a request's places are taken all or none", nil, casePlacesAllOrNone},
	{"a lock-only rule takes its place", nil, casePlaceOfALockOnlyRule},
	{"a rejected request takes no place", nil, casePlaceOfARejectedRequest},
	{"places: bad input is an error", nil, casePlacesBadInput},
}

// suitePolicies lock for a minute at least, far longer than a case runs.
var suitePolicies = map[string]ratelimit.LockoutPolicy{
	"login_account": {Threshold: 3, Duration: time.Minute, MaxDuration: time.Hour},
	"login_device":  {Threshold: 3, Duration: time.Minute, MaxDuration: time.Hour},
}

// escalating doubles from one second up to a cap that is no power of two
// of it, so that the cap shows.
var escalating = map[string]ratelimit.LockoutPolicy{
	"login_account": {Threshold: 2, Duration: time.Second, MaxDuration: 5 * time.Second},
}

// expiring forgets everything within seconds.
var expiring = map[string]ratelimit.LockoutPolicy{
	"login_account": {Threshold: 2, Duration: time.Second, MaxDuration: 2 * time.Second, Memory: 1500 * time.Millisecond},
}

// TestStoreConformance runs every case against every store. The cases
// spend most of their time waiting for windows to pass, so all of them run
// at once (t.Run from goroutines, which -parallel, set to the number of
// CPUs, does not throttle): the suite takes as long as its longest case.
func TestStoreConformance(t *testing.T) {
	var stores sync.WaitGroup
	for _, h := range storeHarnesses {
		stores.Go(func() {
			t.Run(h.name, func(t *testing.T) {
				var cases sync.WaitGroup
				for _, tc := range storeCases {
					cases.Go(func() {
						t.Run(tc.name, func(t *testing.T) {
							p := tc.policies
							if p == nil {
								p = suitePolicies
							}
							tc.run(t, h.open(t, p))
						})
					})
				}
				cases.Wait()
			})
		})
	}
	stores.Wait()
}

func decide(t *testing.T, s ratelimit.Store, rules ...ratelimit.Rule) ratelimit.Decision {
	t.Helper()
	d, err := s.AllowAll(t.Context(), rules...)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Results) != len(rules) {
		t.Fatalf("%d results for %d rules", len(d.Results), len(rules))
	}
	return d
}

func fail(t *testing.T, s ratelimit.Store, name, id string) ratelimit.Failure {
	t.Helper()
	f, err := s.Fail(t.Context(), name, id, "")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// failWith records a failure of attempt for id under name.
func failWith(t *testing.T, s ratelimit.Store, name, id, attempt string) ratelimit.Failure {
	t.Helper()
	f, err := s.Fail(t.Context(), name, id, attempt)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// lockNow fails id under name until it locks and returns the locking failure.
func lockNow(t *testing.T, s ratelimit.Store, name, id string, threshold int) ratelimit.Failure {
	t.Helper()
	for i := range threshold {
		f := fail(t, s, name, id)
		if f.LockedNow != (i == threshold-1) {
			t.Fatalf("failure %d of %d for %s: %+v", i+1, threshold, id, f)
		}
		if f.LockedNow {
			return f
		}
	}
	t.Fatalf("no lock after %d failures", threshold)
	return ratelimit.Failure{}
}

// againIfLate runs try, with fresh identities each time, for as long as
// it reports that it ran late: that the machine paused for longer than the
// case's short windows allow, so that time, not the store, decided what it
// saw and the attempt proves nothing. A store at fault fails within try,
// on time. Five late attempts in a row fail the case.
func againIfLate(t *testing.T, try func(attempt int) (late bool)) {
	t.Helper()
	const attempts = 5
	for attempt := range attempts {
		if !try(attempt) {
			return
		}
		t.Logf("attempt %d ran late (the machine paused longer than the case's windows); again with fresh identities", attempt+1)
	}
	t.Fatalf("%d attempts in a row ran late: the machine is too loaded to judge this case", attempts)
}

func caseExactUnderConcurrency(t *testing.T, s storeUnderTest) {
	const limit, n = 37, 200
	againIfLate(t, func(attempt int) bool {
		rules := []ratelimit.Rule{
			{Name: "login_ip", ID: fmt.Sprintf("192.0.%d.0/24", 2+attempt), Limit: ratelimit.PerMinute(10 * n)},
			{Name: "login_account", ID: fmt.Sprintf("ann%d@example.com", attempt), Limit: ratelimit.PerMinute(limit), Lockable: true},
		}
		start := time.Now()
		got := burst(t, n, func(int) (bool, error) {
			d, err := s.AllowAll(t.Context(), rules...)
			return d.Allowed, err
		})
		if got != limit {
			t.Fatalf("%d concurrent requests at a limit of %d: admitted %d", n, limit, got)
		}
		d := decide(t, s, rules...)
		// On a cluster the two rules' keys are in two slots, and a
		// rejected request takes back what the other admitted; a take-back
		// that waits longer than it may is abandoned (the entry counts
		// until it leaves, only stricter). A burst that took that long
		// (it takes a tenth of a second) ran late.
		if time.Since(start) > ratelimit.TakeBackTimeout {
			return true
		}
		if d.Allowed || d.Results[1].Count != limit || d.Results[1].Remaining != 0 || d.Results[0].Count != limit {
			t.Fatalf("request after the burst: %+v; want rejected by the account at %d, the address holding the %d admitted", d, limit, limit)
		}
		return false
	})
}

func caseRejectedKeepsNoQuota(t *testing.T, s storeUnderTest) {
	wide := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.0/24", Limit: ratelimit.PerMinute(5)}
	full := ratelimit.Rule{Name: "login_account", ID: "victim@example.com", Limit: ratelimit.PerMinute(1)}
	if d := decide(t, s, full); !d.Allowed {
		t.Fatalf("first request of the account: %+v", d)
	}
	// The account is full, so every request naming it is refused, in
	// either order, however many arrive at once; none may cost the
	// address anything.
	got := burst(t, 100, func(i int) (bool, error) {
		rules := []ratelimit.Rule{wide, full}
		if i%2 == 1 {
			rules[0], rules[1] = rules[1], rules[0]
		}
		d, err := s.AllowAll(t.Context(), rules...)
		return d.Allowed, err
	})
	if got != 0 {
		t.Fatalf("admitted %d requests past a full rule", got)
	}
	d := decide(t, s, wide, full)
	if d.Allowed || !d.Results[0].Allowed || d.Results[0].Count != 0 || d.Results[0].Remaining != 5 || d.Results[1].Allowed {
		t.Fatalf("rejected request: %+v; want the address admitting it with nothing counted", d)
	}
	if rej := d.Rejected(); len(rej) != 1 || rej[0].Name != "login_account" {
		t.Fatalf("rejected by %+v, want login_account only", rej)
	}
	more := topUpStore(t, s, 5, wide)
	if more != 5 {
		t.Fatalf("the address admitted %d after 101 rejected requests, want its whole limit 5", more)
	}
}

// caseAllOrNoneUnderConcurrency: a request that one rule rejects takes no
// slot from another rule, not even for a moment. Requests for a full
// account and a shared address race requests for the address alone; the
// address must admit exactly its limit of the latter, and hold exactly
// those. A store that records in some rules and takes back after (two
// steps) lets the doomed requests fill the address for an instant and
// turns some of the others away. The two rules' keys share a cluster slot,
// which is what lets a cluster decide them in one step too.
func caseAllOrNoneUnderConcurrency(t *testing.T, s storeUnderTest) {
	const limit, doomed, alone = 20, 300, 100
	for trial := range trials {
		full := ratelimit.Rule{Name: "login_account", ID: fmt.Sprintf("full%d@example.com", trial), Limit: ratelimit.PerMinute(1), Lockable: true}
		shared := ratelimit.Rule{Name: "login_ip", ID: sameSlot(t, full, "login_ip"), Limit: ratelimit.PerMinute(limit)}
		if d := decide(t, s, full); !d.Allowed {
			t.Fatalf("first request of the account: %+v", d)
		}
		got := burst(t, doomed+alone, func(i int) (bool, error) {
			rules := []ratelimit.Rule{shared}
			if i%4 != 0 {
				rules = append(rules, full)
			}
			d, err := s.AllowAll(t.Context(), rules...)
			if err == nil && d.Allowed && len(rules) > 1 {
				return false, fmt.Errorf("admitted past a full rule: %+v", d)
			}
			return d.Allowed, err
		})
		if got != limit {
			t.Fatalf("trial %d: %d requests for the address alone, racing %d rejected ones that also named it: admitted %d, want exactly its limit %d",
				trial, alone, doomed, got, limit)
		}
		d := decide(t, s, shared)
		if d.Allowed || d.Results[0].Count != limit {
			t.Fatalf("trial %d: the address after the race: %+v; want full, holding exactly the %d admitted", trial, d, limit)
		}
		d = decide(t, s, shared, full)
		if d.Results[1].Count != 1 {
			t.Fatalf("trial %d: the account after the race: %+v; want its one admission", trial, d)
		}
	}
}

// sameSlot returns an identity for a rule named name whose keys share the
// Redis Cluster slot of r's.
func sameSlot(t *testing.T, r ratelimit.Rule, name string) string {
	t.Helper()
	of := func(name, id string) int {
		k, err := ratelimit.NewKeys("", name)
		if err != nil {
			t.Fatal(err)
		}
		return ratelimit.Slot(k.Log(id))
	}
	want := of(r.Name, r.ID)
	for i := range 1 << 22 {
		if id := fmt.Sprintf("192.0.2.%d", i); of(name, id) == want {
			return id
		}
	}
	t.Fatal("no identity found in the slot")
	return ""
}

// The windows of the cases that wait are short enough to keep the suite
// fast and long enough that no pause of a loaded machine between two
// requests lets an entry leave unseen.

// topUpStore is topUp of the requests s admits for rules.
func topUpStore(t *testing.T, s storeUnderTest, max int, rules ...ratelimit.Rule) int {
	t.Helper()
	return topUp(t, max, func() (bool, error) {
		d, err := s.AllowAll(t.Context(), rules...)
		return d.Allowed, err
	})
}

func caseWindowSlides(t *testing.T, s storeUnderTest) {
	const window = time.Second
	againIfLate(t, func(attempt int) bool {
		rule := ratelimit.Rule{Name: "login_ip", ID: fmt.Sprintf("198.51.100.%d", 7+attempt), Limit: ratelimit.Limit{Count: 3, Window: window}}
		start := time.Now()
		if d := decide(t, s, rule); !d.Allowed {
			t.Fatalf("first request: %+v", d)
		}
		firstBack := time.Now()
		time.Sleep(window / 4)
		for i := range 2 {
			if d := decide(t, s, rule); !d.Allowed {
				t.Fatalf("request %d: %+v", i+2, d)
			}
		}
		asked := time.Now()
		d := decide(t, s, rule)
		if d.Allowed {
			// Only wrong if the first entry cannot have left yet: it
			// was made after start.
			if time.Since(start) >= window {
				return true
			}
			t.Fatalf("fourth request in one window: %+v", d)
		}
		// The window slides: the first entry, older than the others by a
		// quarter of a window, leaves first. It was made before its answer came back
		// and the rejection after it was asked for, so it must leave within
		// window - (asked - firstBack); a fixed window, or one that slid from
		// the newest entry, would say more.
		if most := window - asked.Sub(firstBack); d.RetryAfter <= 0 || d.RetryAfter > most {
			t.Fatalf("retry-after %v, want in (0, %v]: when the oldest entry leaves", d.RetryAfter, most)
		}
		time.Sleep(d.RetryAfter)
		if d := decide(t, s, rule); !d.Allowed {
			t.Fatalf("after the oldest entry left (%v after the first request): %+v; want admitted", time.Since(start), d)
		}
		time.Sleep(window)
		got := topUpStore(t, s, 3, rule)
		if got != 3 {
			t.Fatalf("a whole window later: admitted %d, want the limit 3 again", got)
		}
		return false
	})
}

func caseRetryAfter(t *testing.T, s storeUnderTest) {
	againIfLate(t, func(attempt int) bool { return retryAfterOnce(t, s, attempt) })
}

// retryAfterOnce is caseRetryAfter's attempt attempt, with identities of
// its own; late when the requests that fill its logs took so long that
// their entries could have left the window before it asked.
func retryAfterOnce(t *testing.T, s storeUnderTest, attempt int) (late bool) {
	const window = time.Second
	short := ratelimit.Rule{Name: "login_ip", ID: fmt.Sprintf("203.0.113.9/%d", attempt), Limit: ratelimit.Limit{Count: 2, Window: window}}
	start := time.Now()
	for range 2 {
		decide(t, s, short)
	}
	first := decide(t, s, short)
	// Asked again at once: the answer counts down, never up, never to zero.
	again := decide(t, s, short)
	if time.Since(start) > window/2 {
		return true
	}
	if first.Allowed || first.RetryAfter <= 0 || first.RetryAfter > window || first.Results[0].RetryAfter != first.RetryAfter {
		t.Fatalf("rejection: %+v; want a retry-after in (0, %v]", first, window)
	}
	if again.Allowed || again.RetryAfter <= 0 || again.RetryAfter > first.RetryAfter {
		t.Fatalf("rejection asked again: retry-after %v, want in (0, %v]", again.RetryAfter, first.RetryAfter)
	}
	// Never early: whoever waits what it said is admitted.
	time.Sleep(again.RetryAfter)
	if d := decide(t, s, short); !d.Allowed {
		t.Fatalf("after waiting the retry-after %v: %+v; want admitted", again.RetryAfter, d)
	}

	// Several rules rejecting: the decision waits for the last of them.
	short = ratelimit.Rule{Name: "login_ip", ID: fmt.Sprintf("203.0.113.10/%d", attempt), Limit: ratelimit.Limit{Count: 1, Window: window / 2}}
	long := ratelimit.Rule{Name: "login_account", ID: fmt.Sprintf("bob%d@example.com", attempt), Limit: ratelimit.Limit{Count: 1, Window: window}}
	start = time.Now()
	if d := decide(t, s, short, long); !d.Allowed {
		t.Fatalf("first request of two fresh rules: %+v", d)
	}
	d := decide(t, s, short, long)
	// The same rules, the longer first: the decision waits for the longest
	// whatever the order, not for the last rule that rejected.
	swapped := decide(t, s, long, short)
	if time.Since(start) > window/4 {
		return true
	}
	if swapped.Allowed || swapped.RetryAfter != swapped.Results[0].RetryAfter || swapped.RetryAfter < swapped.Results[1].RetryAfter {
		t.Fatalf("both rules full, the longer first: %+v; want the decision's retry-after the longer rule's", swapped)
	}
	if d.Allowed || len(d.Rejected()) != 2 {
		t.Fatalf("both rules full: %+v; want both rejecting", d)
	}
	for _, r := range d.Rejected() {
		if r.RetryAfter <= 0 || r.RetryAfter > d.RetryAfter {
			t.Fatalf("rule %s retry-after %v, decision %v: want each in (0, decision's]", r.Name, r.RetryAfter, d.RetryAfter)
		}
	}
	if d.RetryAfter != d.Results[1].RetryAfter {
		t.Fatalf("decision retry-after %v, want the longer rule's %v", d.RetryAfter, d.Results[1].RetryAfter)
	}
	time.Sleep(d.RetryAfter)
	if d := decide(t, s, short, long); !d.Allowed {
		t.Fatalf("after waiting the decision's retry-after: %+v; want admitted", d)
	}
	return false
}

// caseLockedRetryAfter: a locked rule whose log is full too admits again
// only once both let it, and says so: its retry-after is the later of the
// lock's end and the log's, not the lock's alone, after which the retry
// would be rejected by the full log.
func caseLockedRetryAfter(t *testing.T, s storeUnderTest) {
	p := escalating["login_account"]
	const window = time.Minute
	againIfLate(t, func(attempt int) bool {
		rule := ratelimit.Rule{Name: "login_account", ID: fmt.Sprintf("locked-and-full%d@example.com", attempt), Limit: ratelimit.Limit{Count: 2, Window: window}, Lockable: true}
		start := time.Now()
		for i := range 2 {
			if d := decide(t, s, rule); !d.Allowed {
				t.Fatalf("request %d: %+v; want admitted", i+1, d)
			}
		}
		locking := time.Now()
		if f := lockNow(t, s, rule.Name, rule.ID, p.Threshold); f.LockedFor != p.LockFor(1) {
			t.Fatalf("lock: %+v; want one of %v", f, p.LockFor(1))
		}
		// The first entry was made after start, so it leaves no earlier than
		// a window after start: far later than the lock ends.
		d := decide(t, s, rule)
		r := d.Results[0]
		if !r.Locked && time.Since(locking) >= p.LockFor(1) {
			return true // the lock of a second had run out
		}
		if least := window - time.Since(start); d.Allowed || !r.Locked || r.RetryAfter < least || r.RetryAfter > window || d.RetryAfter != r.RetryAfter {
			t.Fatalf("locked, its log full: %+v; want locked, with a retry-after in [%v, %v], when the log has room", d, least, window)
		}
		return false
	})
}

func caseLockoutOnce(t *testing.T, s storeUnderTest) {
	for trial := range trials {
		lockoutOnce(t, s, fmt.Sprintf("carol%d@example.com", trial))
	}
}

// atOnce makes n calls of call, all released at once, and returns what
// each got.
func atOnce[T any](n int, call func() (T, error)) ([]T, []error) {
	out := make([]T, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			out[i], errs[i] = call()
		})
	}
	close(start)
	wg.Wait()
	return out, errs
}

// failAtOnce records n failures of id under login_account with attempt,
// all released at once, and returns what each got.
func failAtOnce(t *testing.T, s storeUnderTest, id, attempt string, n int) ([]ratelimit.Failure, []error) {
	return atOnce(n, func() (ratelimit.Failure, error) {
		return s.Fail(t.Context(), "login_account", id, attempt)
	})
}

func lockoutOnce(t *testing.T, s storeUnderTest, id string) {
	p := suitePolicies["login_account"]
	out, errs := failAtOnce(t, s, id, "", 200)
	lockedNow, counted := 0, 0
	for i, f := range out {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if f.LockedNow {
			lockedNow++
			if f.Failures != p.Threshold || f.Level != 1 || f.LockedFor != p.LockFor(1) {
				t.Errorf("locking failure: %+v; want failure %d, level 1, for %v", f, p.Threshold, p.LockFor(1))
			}
		}
		if f.Failures > 0 {
			counted++
		}
	}
	if lockedNow != 1 || counted != p.Threshold {
		t.Fatalf("%d concurrent failures: %d locked, %d counted; want exactly 1 and %d", len(out), lockedNow, counted, p.Threshold)
	}
	lockable := ratelimit.Rule{Name: "login_account", ID: id, Limit: ratelimit.PerMinute(100), Lockable: true}
	d := decide(t, s, lockable)
	if d.Allowed || !d.Results[0].Locked || d.RetryAfter <= 0 || d.RetryAfter > p.LockFor(1) {
		t.Fatalf("while locked: %+v; want rejected as locked, retry-after in (0, %v]", d, p.LockFor(1))
	}
	if f := fail(t, s, "login_account", id); f.LockedNow || f.Failures != 0 || f.Level != 1 || f.LockedFor <= 0 {
		t.Fatalf("failure while locked: %+v; want not counted, level 1, time left", f)
	}
	unlockable := lockable
	unlockable.Lockable = false
	if d := decide(t, s, unlockable); !d.Allowed {
		t.Fatalf("a rule of the same name that is not Lockable: %+v; want admitted", d)
	}
}

func caseLockoutsPerRule(t *testing.T, s storeUnderTest) {
	p := suitePolicies["login_device"]
	id := "same-identity"
	lockNow(t, s, "login_device", id, p.Threshold)
	rule := func(name string) ratelimit.Rule {
		return ratelimit.Rule{Name: name, ID: id, Limit: ratelimit.PerMinute(100), Lockable: true}
	}
	if d := decide(t, s, rule("login_device")); d.Allowed || !d.Results[0].Locked {
		t.Fatalf("the locked rule: %+v; want locked", d)
	}
	if d := decide(t, s, rule("login_account")); !d.Allowed {
		t.Fatalf("the same identity under another rule: %+v; want admitted", d)
	}
	if f := fail(t, s, "login_account", id); f.Failures != 1 || f.Level != 0 {
		t.Fatalf("a failure under another rule: %+v; want its own count, 1, and no level", f)
	}
	if was, err := s.Clear(t.Context(), "login_account", id); err != nil || was {
		t.Fatalf("Clear under another rule: %v, %v; want nothing to end", was, err)
	}
	if d := decide(t, s, rule("login_device")); d.Allowed {
		t.Fatalf("the locked rule after another rule's Clear: %+v; want still locked", d)
	}
	if _, err := s.Fail(t.Context(), "no_lockouts", id, ""); err == nil {
		t.Fatal("Fail under a rule without lockouts: no error")
	}
	if _, err := s.Clear(t.Context(), "no_lockouts", id); err == nil {
		t.Fatal("Clear under a rule without lockouts: no error")
	}
}

func caseEscalation(t *testing.T, s storeUnderTest) {
	p := escalating["login_account"]
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	againIfLate(t, func(attempt int) bool {
		id := fmt.Sprintf("dave%d@example.com", attempt)
		for i, d := range want {
			level := i + 1
			if got := p.LockFor(level); got != d {
				t.Fatalf("LockFor(%d) = %v, want %v", level, got, d)
			}
			locking := time.Now()
			f := lockNow(t, s, "login_account", id, p.Threshold)
			if f.Level != level || f.LockedFor != d {
				t.Fatalf("lock %d: level %d for %v; want level %d for %v", level, f.Level, f.LockedFor, level, d)
			}
			was, err := s.Clear(t.Context(), "login_account", id)
			if err != nil {
				t.Fatal(err)
			}
			if !was {
				// Only wrong if the lock cannot have run out yet.
				if time.Since(locking) >= d {
					return true
				}
				t.Fatalf("Clear of lock %d: nothing to end", level)
			}
		}
		return false
	})
}

func caseUnlock(t *testing.T, s storeUnderTest) {
	p := suitePolicies["login_account"]
	id := "erin@example.com"
	rule := ratelimit.Rule{Name: "login_account", ID: id, Limit: ratelimit.PerMinute(100), Lockable: true}
	// Clear forgets failures short of a lock.
	fail(t, s, "login_account", id)
	if was, err := s.Clear(t.Context(), "login_account", id); err != nil || was {
		t.Fatalf("Clear before any lock: %v, %v; want nothing to end", was, err)
	}
	first := lockNow(t, s, "login_account", id, p.Threshold)
	if first.Level != 1 {
		t.Fatalf("first lock: %+v", first)
	}
	if d := decide(t, s, rule); d.Allowed {
		t.Fatalf("while locked: %+v", d)
	}
	if was, err := s.Clear(t.Context(), "login_account", id); err != nil || !was {
		t.Fatalf("Clear of a lock: %v, %v; want it reported", was, err)
	}
	if d := decide(t, s, rule); !d.Allowed {
		t.Fatalf("after Clear: %+v; want admitted", d)
	}
	if was, err := s.Clear(t.Context(), "login_account", id); err != nil || was {
		t.Fatalf("Clear again: %v, %v; want nothing to end", was, err)
	}
	// The level outlives the unlock: the next lock escalates.
	second := lockNow(t, s, "login_account", id, p.Threshold)
	if second.Level != 2 || second.LockedFor != p.LockFor(2) {
		t.Fatalf("lock after an unlock: %+v; want level 2 for %v", second, p.LockFor(2))
	}
}

// caseUnlockMemory: an unlock ends the lock, and the level is remembered
// for the policy's Memory after that end, as after a lock that runs out:
// a lock soon after escalates, one later than Memory after the unlock
// starts at level 1 again, however long the cleared lock had left.
func caseUnlockMemory(t *testing.T, s storeUnderTest) {
	p := expiring["login_account"]
	againIfLate(t, func(attempt int) bool {
		soon, later := fmt.Sprintf("soon%d@example.com", attempt), fmt.Sprintf("later%d@example.com", attempt)
		// Each one's memory runs from its own unlock: soon's began
		// before later was locked and cleared, which under load can
		// take a good part of the memory.
		// From before its Clear, for the lock that must still find its
		// level; from after, for the one that must not.
		before, after := map[string]time.Time{}, map[string]time.Time{}
		for _, id := range []string{soon, later} {
			if f := lockNow(t, s, "login_account", id, p.Threshold); f.Level != 1 {
				t.Fatalf("first lock of %s: %+v; want level 1", id, f)
			}
			before[id] = time.Now()
			if was, err := s.Clear(t.Context(), "login_account", id); err != nil || !was {
				t.Fatalf("Clear of %s: %v, %v; want the lock ended", id, was, err)
			}
			after[id] = time.Now()
		}
		time.Sleep(p.Memory / 3)
		f := lockNow(t, s, "login_account", soon, p.Threshold)
		if time.Since(before[soon]) >= p.Memory {
			return true
		}
		if f.Level != 2 {
			t.Fatalf("a lock within the memory after an unlock: %+v; want level 2", f)
		}
		// Past the memory after the unlock, though not after the end the
		// cleared lock would have had.
		time.Sleep(time.Until(after[later].Add(p.Memory + 200*time.Millisecond)))
		if f := lockNow(t, s, "login_account", later, p.Threshold); f.Level != 1 || f.LockedFor != p.LockFor(1) {
			t.Fatalf("a lock past the memory after an unlock: %+v; want level 1 again, for %v", f, p.LockFor(1))
		}
		return false
	})
}

// caseRunOutMemory: a lock that runs out, unlocked by no one, keeps its
// level for the memory after its end, not after its start: a lock of the
// cap that outlasts the memory must not leave the next lock at level 1,
// which would give a patient attacker the shortest lock at every round.
func caseRunOutMemory(t *testing.T, s storeUnderTest) {
	p := expiring["login_account"]
	if p.Memory >= p.Duration+p.Memory/2 {
		t.Fatalf("policy %+v: the memory must end before the lock's end and half the memory", p)
	}
	againIfLate(t, func(attempt int) bool {
		id := fmt.Sprintf("patient%d@example.com", attempt)
		before := time.Now()
		if f := lockNow(t, s, "login_account", id, p.Threshold); f.Level != 1 || f.LockedFor != p.LockFor(1) {
			t.Fatalf("first lock: %+v; want level 1 for %v", f, p.LockFor(1))
		}
		locked := time.Now()
		// Past the memory counted from the lock's start, within the
		// memory counted from its end.
		time.Sleep(time.Until(locked.Add(p.Duration + p.Memory/2)))
		f := lockNow(t, s, "login_account", id, p.Threshold)
		if time.Since(before) >= p.Duration+p.Memory {
			return true
		}
		if f.Level != 2 || f.LockedFor != p.LockFor(2) {
			t.Fatalf("a lock within the memory after the last one ran out: %+v; want level 2 for %v", f, p.LockFor(2))
		}
		return false
	})
}

func caseHold(t *testing.T, s storeUnderTest) {
	p := suitePolicies["login_account"]
	rule := func(id string) ratelimit.Rule {
		return ratelimit.Rule{Name: "login_account", ID: id, Limit: ratelimit.PerMinute(100), Lockable: true}
	}
	hold := func(locks ...ratelimit.HeldLock) {
		t.Helper()
		if err := s.Hold(t.Context(), locks...); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	hold(ratelimit.HeldLock{Name: "login_account", ID: "held", Until: now.Add(time.Hour), Level: 3},
		ratelimit.HeldLock{Name: "login_account", ID: "ended", Until: now.Add(-time.Second), Level: 2})
	// Shorter and lower: changes nothing.
	hold(ratelimit.HeldLock{Name: "login_account", ID: "held", Until: now.Add(time.Minute), Level: 1})
	d := decide(t, s, rule("held"))
	// Redis counts the time left in whole milliseconds, rounded up, so
	// that a lock held there never ends before its end.
	if d.Allowed || !d.Results[0].Locked || d.RetryAfter <= 59*time.Minute || d.RetryAfter > time.Hour+2*time.Millisecond {
		t.Fatalf("held lock: %+v; want locked for the hour held", d)
	}
	if d := decide(t, s, rule("ended")); !d.Allowed {
		t.Fatalf("a lock that had ended: %+v; want admitted", d)
	}
	// The level came along: the next lock escalates past it.
	if was, err := s.Clear(t.Context(), "login_account", "held"); err != nil || !was {
		t.Fatalf("Clear of a held lock: %v, %v", was, err)
	}
	if f := lockNow(t, s, "login_account", "held", p.Threshold); f.Level != 4 || f.LockedFor != p.LockFor(4) {
		t.Fatalf("lock after a held level 3: %+v; want level 4 for %v", f, p.LockFor(4))
	}
	// A lock of a rule without lockouts is reported, and holds back none
	// of the others.
	err := s.Hold(t.Context(), ratelimit.HeldLock{Name: "no_lockouts", ID: "x", Until: now.Add(time.Hour), Level: 1},
		ratelimit.HeldLock{Name: "login_account", ID: "beside", Until: now.Add(time.Hour), Level: 1})
	if !errors.Is(err, ratelimit.ErrNoLockouts) {
		t.Fatalf("Hold under a rule without lockouts: %v; want ErrNoLockouts", err)
	}
	if d := decide(t, s, rule("beside")); d.Allowed || !d.Results[0].Locked {
		t.Fatalf("a lock held beside one of a rule without lockouts: %+v; want locked", d)
	}
}

// caseHoldKeepsTheLevel: a lock held at a level below the identity's (an
// administrator's lock is held at level 1) keeps the identity's level
// until Memory after the held lock ends, as a lock that failures made
// would: the next lock escalates past it.
func caseHoldKeepsTheLevel(t *testing.T, s storeUnderTest) {
	p := expiring["login_account"]
	// The level is remembered for 1.5 s: a loaded machine's pause longer
	// than that between an unlock or a lock's end and the next lock lets
	// it go, and the attempt is late.
	againIfLate(t, func(attempt int) bool {
		id := fmt.Sprintf("held-low%d@example.com", attempt)
		var cleared time.Time
		for level := 1; level <= 2; level++ {
			f := lockNow(t, s, "login_account", id, p.Threshold)
			if f.Level != level {
				if level == 2 && time.Since(cleared) >= p.Memory {
					return true
				}
				t.Fatalf("lock %d: %+v", level, f)
			}
			cleared = time.Now()
			if was, err := s.Clear(t.Context(), "login_account", id); err != nil || !was {
				t.Fatalf("Clear: %v, %v", was, err)
			}
		}
		// Held past the level's memory after the unlock.
		held := time.Now().Add(p.Memory + time.Second)
		if err := s.Hold(t.Context(), ratelimit.HeldLock{Name: "login_account", ID: id, Until: held, Level: 1}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(held))
		rule := ratelimit.Rule{Name: "login_account", ID: id, Limit: ratelimit.PerMinute(100), Lockable: true}
		// The lock ended after the last decision that found it began.
		var stillLocked time.Time
		for {
			asked := time.Now()
			if !decide(t, s, rule).Results[0].Locked {
				break
			}
			stillLocked = asked
			// Redis counts the lock's time from when its script ran.
			time.Sleep(20 * time.Millisecond)
		}
		if stillLocked.IsZero() {
			stillLocked = held
		}
		f := lockNow(t, s, "login_account", id, p.Threshold)
		if f.Level != 3 {
			if time.Since(stillLocked) >= p.Memory {
				return true
			}
			t.Fatalf("a lock within the memory after a held lock at level 1, the identity at 2: %+v; want level 3", f)
		}
		return false
	})
}

// caseHeldLockCountsAnew: a held lock, like one that failures made,
// starts its identity's failures anew. Those counted before it are gone
// when it ends: one failure then is the first of a new count, not the one
// that locks again, at a higher level, an owner who mistyped once.
func caseHeldLockCountsAnew(t *testing.T, s storeUnderTest) {
	p := suitePolicies["login_account"]
	const lock = 500 * time.Millisecond
	againIfLate(t, func(attempt int) bool {
		id := fmt.Sprintf("held-anew%d@example.com", attempt)
		for i := 1; i < p.Threshold; i++ {
			if f := fail(t, s, "login_account", id); f.Failures != i || f.LockedNow {
				t.Fatalf("failure %d: %+v; want counted, not locked", i, f)
			}
		}
		start := time.Now()
		until := start.Add(lock)
		if err := s.Hold(t.Context(), ratelimit.HeldLock{Name: "login_account", ID: id, Until: until, Level: 1}); err != nil {
			t.Fatal(err)
		}
		rule := ratelimit.Rule{Name: "login_account", ID: id, Limit: ratelimit.PerMinute(100), Lockable: true}
		d := decide(t, s, rule)
		if d.Allowed || !d.Results[0].Locked {
			if time.Since(start) >= lock {
				return true
			}
			t.Fatalf("while the held lock lasts: %+v; want locked", d)
		}
		// Never early: the lock has ended then.
		time.Sleep(d.RetryAfter)
		if f := fail(t, s, "login_account", id); f.LockedNow || f.Failures != 1 || f.Level != 1 {
			t.Fatalf("one failure after the held lock ended: %+v; want the first of a new count, at level 1, not a lock", f)
		}
		return false
	})
}

func caseReset(t *testing.T, s storeUnderTest) {
	rule := ratelimit.Rule{Name: "reset_account", ID: "frank@example.com", Limit: ratelimit.PerHour(2)}
	other := ratelimit.Rule{Name: "reset_account", ID: "grace@example.com", Limit: ratelimit.PerHour(2)}
	for range 2 {
		decide(t, s, rule, other)
	}
	if err := s.Reset(t.Context(), rule.Name, rule.ID); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, s, rule); !d.Allowed || d.Results[0].Count != 1 {
		t.Fatalf("after Reset: %+v; want admitted as the first", d)
	}
	if d := decide(t, s, other); d.Allowed {
		t.Fatalf("another identity after Reset: %+v; want still full", d)
	}
}

// caseRemembered: whatever a store remembers, Remembered answers only a
// rejection, and asking it records nothing.
func caseRemembered(t *testing.T, s storeUnderTest) {
	full := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.0/24", Limit: ratelimit.PerHour(1)}
	free := ratelimit.Rule{Name: "login_account", ID: "ivy@example.com", Limit: ratelimit.PerHour(1), Lockable: true}
	decide(t, s, full)
	if d := decide(t, s, full); d.Allowed {
		t.Fatalf("a full rule: %+v; want rejected", d)
	}
	if d, ok := s.Remembered(full, free); ok && (d.Allowed || !d.FromMemory || d.RetryAfter <= 0 || len(d.Results) != 2) {
		t.Fatalf("remembered: %+v; want a rejection from memory, with a result for each rule", d)
	}
	if d, ok := s.Remembered(free); ok {
		t.Fatalf("a rule that never rejected: %+v; want nothing remembered", d)
	}
	if _, ok := s.Remembered(ratelimit.Rule{Name: "bad name"}); ok {
		t.Fatal("an invalid rule answered from memory")
	}
	if d := decide(t, s, free); !d.Allowed || d.Results[0].Count != 1 {
		t.Fatalf("after the questions: %+v; want admitted as the first", d)
	}
}

func caseRepeatedAttempt(t *testing.T, s storeUnderTest) {
	p := suitePolicies["login_account"]
	id := "hana@example.com"
	rule := ratelimit.Rule{Name: "login_account", ID: id, Limit: ratelimit.PerMinute(100), Lockable: true}
	// Attempts are opaque: any bytes, of any length.
	same := "\x00{same}" + strings.Repeat("x", 4096)
	if f := failWith(t, s, "login_account", id, same); f.Failures != 1 || f.LockedNow {
		t.Fatalf("first failure of an attempt: %+v; want counted, 1", f)
	}
	for i := range p.Threshold + 5 {
		if f := failWith(t, s, "login_account", id, same); f.Failures != 1 || f.LockedNow || f.LockedFor != 0 {
			t.Fatalf("repeat %d of the same attempt: %+v; want not counted, still 1", i+1, f)
		}
	}
	if d := decide(t, s, rule); !d.Allowed {
		t.Fatalf("after %d repeats of one attempt: %+v; want admitted", p.Threshold+5, d)
	}
	// The same attempt under another identity or another rule is its own.
	if f := failWith(t, s, "login_account", "other@example.com", same); f.Failures != 1 {
		t.Fatalf("the attempt for another identity: %+v; want counted, 1", f)
	}
	if f := failWith(t, s, "login_device", id, same); f.Failures != 1 {
		t.Fatalf("the attempt under another rule: %+v; want counted, 1", f)
	}
	// "" always counts; distinct attempts count each, up to the lock.
	if f := failWith(t, s, "login_account", id, ""); f.Failures != 2 || f.LockedNow {
		t.Fatalf("a failure without an attempt: %+v; want counted, 2", f)
	}
	for i := 3; i < p.Threshold; i++ {
		if f := failWith(t, s, "login_account", id, ""); f.Failures != i || f.LockedNow {
			t.Fatalf("failure %d without an attempt: %+v; want counted", i, f)
		}
	}
	if f := failWith(t, s, "login_account", id, same); f.Failures != p.Threshold-1 || f.LockedNow {
		t.Fatalf("the first attempt again: %+v; want not counted, still %d", f, p.Threshold-1)
	}
	f := failWith(t, s, "login_account", id, "distinct")
	if !f.LockedNow || f.Failures != p.Threshold || f.Level != 1 {
		t.Fatalf("a distinct attempt at the threshold: %+v; want the lock", f)
	}
	if d := decide(t, s, rule); d.Allowed || !d.Results[0].Locked {
		t.Fatalf("after the lock: %+v; want locked", d)
	}

	// Distinct attempts alone lock at the threshold.
	other := "ivan@example.com"
	for i := range p.Threshold {
		f := failWith(t, s, "login_account", other, fmt.Sprintf("guess %d", i))
		if f.Failures != i+1 || f.LockedNow != (i == p.Threshold-1) {
			t.Fatalf("distinct attempt %d of %d: %+v", i+1, p.Threshold, f)
		}
	}
}

func caseRepeatedAttemptConcurrent(t *testing.T, s storeUnderTest) {
	p := suitePolicies["login_account"]
	for trial := range trials {
		id := fmt.Sprintf("judy%d@example.com", trial)
		// Two short of the lock by distinct attempts, then the same attempt
		// from 50 goroutines: counted once it leaves the identity one short,
		// counted twice it locks.
		for i := range p.Threshold - 2 {
			failWith(t, s, "login_account", id, fmt.Sprintf("earlier %d", i))
		}
		out, errs := failAtOnce(t, s, id, "the same password", 50)
		for i, f := range out {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if f.LockedNow || f.Failures != p.Threshold-1 {
				t.Fatalf("%d concurrent failures of one attempt, one of them: %+v; want counted once, %d in all", len(out), f, p.Threshold-1)
			}
		}
		if f := failWith(t, s, "login_account", id, "another"); !f.LockedNow || f.Failures != p.Threshold {
			t.Fatalf("a distinct attempt after them: %+v; want the lock at %d", f, p.Threshold)
		}
	}
}

func caseAttemptsCleared(t *testing.T, s storeUnderTest) {
	p := suitePolicies["login_account"]
	id := "kim@example.com"
	failWith(t, s, "login_account", id, "q")
	failWith(t, s, "login_account", id, "r")
	if was, err := s.Clear(t.Context(), "login_account", id); err != nil || was {
		t.Fatalf("Clear before any lock: %v, %v", was, err)
	}
	// Forgotten: each counts again, once.
	if f := failWith(t, s, "login_account", id, "q"); f.Failures != 1 {
		t.Fatalf("an attempt after Clear: %+v; want counted anew, 1", f)
	}
	if f := failWith(t, s, "login_account", id, "q"); f.Failures != 1 {
		t.Fatalf("the attempt again: %+v; want not counted, 1", f)
	}
	if f := failWith(t, s, "login_account", id, "r"); f.Failures != 2 {
		t.Fatalf("the other attempt after Clear: %+v; want counted anew, 2", f)
	}
	// After a lock and its Clear, the attempts that made it count again.
	for i := 3; i <= p.Threshold; i++ {
		failWith(t, s, "login_account", id, fmt.Sprint(i))
	}
	if was, err := s.Clear(t.Context(), "login_account", id); err != nil || !was {
		t.Fatalf("Clear of the lock: %v, %v; want it reported", was, err)
	}
	if f := failWith(t, s, "login_account", id, "q"); f.Failures != 1 || f.Level != 1 {
		t.Fatalf("an attempt after the lock's Clear: %+v; want counted anew, 1, level 1", f)
	}
}

func caseAttemptsExpire(t *testing.T, s storeUnderTest) {
	p := expiring["login_account"]
	id := "lee@example.com"
	if f := failWith(t, s, "login_account", id, "old password"); f.Failures != 1 {
		t.Fatalf("first failure: %+v", f)
	}
	if f := failWith(t, s, "login_account", id, "old password"); f.Failures != 1 {
		t.Fatalf("the same attempt at once: %+v; want not counted, 1", f)
	}
	// Past the memory the failure is forgotten, and its attempt with it:
	// the attempt counts again, as a first failure.
	time.Sleep(p.Memory + 100*time.Millisecond)
	if f := failWith(t, s, "login_account", id, "old password"); f.Failures != 1 || f.LockedNow {
		t.Fatalf("the attempt after the memory: %+v; want counted anew, 1", f)
	}
	if f := failWith(t, s, "login_account", id, "old password"); f.Failures != 1 {
		t.Fatalf("and once more: %+v; want not counted, 1", f)
	}
}

func caseExpiry(t *testing.T, s storeUnderTest) {
	if s.expiries == nil {
		t.Skip("this store keeps no expiring keys (see its harness)")
	}
	p := expiring["login_account"]
	memory := p.Memory
	// Seconds, not milliseconds: every key must still be there when the
	// keys are listed, however loaded the machine running the test is.
	short := ratelimit.Limit{Count: 5, Window: 2 * time.Second}
	long := ratelimit.Limit{Count: 5, Window: 3 * time.Second}
	// Every kind of record: logs, failures and attempts, a lock and its
	// level, a held lock. The shortest lives a second (the lock): listed
	// later than that, a key may be gone for want of time, not of an
	// expiry, and the attempt is late.
	var keys map[string]time.Duration
	againIfLate(t, func(attempt int) bool {
		start := time.Now()
		id := func(name string) string { return fmt.Sprintf("%s-%d", name, attempt) }
		decide(t, s, ratelimit.Rule{Name: "login_ip", ID: id("192.0.2.1"), Limit: short},
			ratelimit.Rule{Name: "login_account", ID: id("locked"), Limit: long, Lockable: true})
		// Locked by distinct attempts, whose record outlives the lock.
		for i := range p.Threshold {
			if f := failWith(t, s, "login_account", id("locked"), fmt.Sprint(i)); f.LockedNow != (i == p.Threshold-1) {
				t.Fatalf("failure %d of %d: %+v", i+1, p.Threshold, f)
			}
		}
		failWith(t, s, "login_account", id("failing"), "an attempt")
		if err := s.Hold(t.Context(), ratelimit.HeldLock{Name: "login_account", ID: id("held"), Until: time.Now().Add(p.MaxDuration), Level: 2}); err != nil {
			t.Fatal(err)
		}
		keys = s.expiries(t)
		if len(keys) < 8 {
			if time.Since(start) >= p.Duration {
				return true
			}
			t.Fatalf("%d keys listed, want at least 8 (2 logs, failures, attempts twice, lock and level twice): %v", len(keys), keys)
		}
		return false
	})
	bound := max(long.Window, p.MaxDuration+memory)
	for k, left := range keys {
		if left <= 0 || left > bound {
			t.Errorf("key %q has %v left, want in (0, %v]", k, left, bound)
		}
	}
	time.Sleep(bound)
	if keys := s.expiries(t); len(keys) != 0 {
		t.Fatalf("%v after the longest bound, keys still held: %v", bound, keys)
	}
}

func caseBadInput(t *testing.T, s storeUnderTest) {
	for _, rules := range [][]ratelimit.Rule{
		nil,
		{{Name: "", ID: "x", Limit: ratelimit.PerMinute(1)}},
		{{Name: "Login-IP", ID: "x", Limit: ratelimit.PerMinute(1)}},
		{{Name: "login_ip", ID: "x", Limit: ratelimit.Limit{Count: 0, Window: time.Minute}}},
		{{Name: "login_ip", ID: "x", Limit: ratelimit.Limit{Count: 1, Window: 0}}},
		{{Name: "login_ip", ID: "x", Limit: ratelimit.PerMinute(1)}, {Name: "login_ip", ID: "x", Limit: ratelimit.Limit{Count: -1, Window: time.Minute}}},
		// No limit is a lock-only rule, and only a lockable rule can be one.
		{{Name: "login_ip", ID: "x"}},
		{{Name: "login_account", ID: "x", Limit: ratelimit.Limit{Window: time.Minute}, Lockable: true}},
		{{Name: "login_account", ID: "x", Limit: ratelimit.Limit{Count: 1}, Lockable: true}},
	} {
		if d, err := s.AllowAll(t.Context(), rules...); err == nil {
			t.Errorf("AllowAll(%+v) = %+v, want an error", rules, d)
		}
	}
	if err := s.Reset(t.Context(), "Bad Name", "x"); err == nil {
		t.Error("Reset of a bad rule name: no error")
	}
	// Identities are any bytes, hashed into keys.
	for _, id := range []string{"", "{", "}x{", "\x00", "\xff\xfe", strings.Repeat("long", 1024)} {
		if d, err := s.AllowAll(t.Context(), ratelimit.Rule{Name: "login_ip", ID: id, Limit: ratelimit.PerMinute(1)}); err != nil || !d.Allowed {
			t.Errorf("identity %q: %+v, %v; want admitted", id, d, err)
		}
	}
}

// caseLockOnly: a lock-only rule (Lockable, no Limit) admits any number of
// requests while its identity is not locked, rejects with the lock's exact
// time left while it is, in one all-or-none decision with limited rules,
// and never records a request: no log, in any store.
func caseLockOnly(t *testing.T, s storeUnderTest) {
	p := suitePolicies["login_account"]
	lockOnly := ratelimit.Rule{Name: "login_account", ID: "password-key", Lockable: true}
	limited := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.77", Limit: ratelimit.PerHour(3)}

	// Far more than any limit would: each admitted, counting nothing.
	for i := range 50 {
		d := decide(t, s, lockOnly)
		if r := d.Results[0]; !d.Allowed || !r.Allowed || r.Locked || r.Count != 0 || r.RetryAfter != 0 {
			t.Fatalf("request %d to a lock-only rule, not locked: %+v; want admitted, counting nothing", i+1, d)
		}
	}
	// Beside a limited rule, the limited one alone decides and counts.
	for i := range 3 {
		d := decide(t, s, limited, lockOnly)
		if !d.Allowed || d.Results[0].Count != i+1 || d.Results[1].Count != 0 || !d.Results[1].Allowed {
			t.Fatalf("request %d with a limited rule: %+v; want admitted, counted by the limited rule alone", i+1, d)
		}
	}
	if d := decide(t, s, lockOnly, limited); d.Allowed || d.Results[1].Allowed || !d.Results[0].Allowed || d.Results[0].Locked {
		t.Fatalf("the limited rule full: %+v; want rejected by it alone", d)
	}

	// Locked: rejected with the lock's time left, however fresh the other rules.
	lockNow(t, s, lockOnly.Name, lockOnly.ID, p.Threshold)
	fresh := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.78", Limit: ratelimit.PerHour(3)}
	d := decide(t, s, fresh, lockOnly)
	lock := d.Results[1]
	if d.Allowed || !d.Results[0].Allowed || lock.Allowed || !lock.Locked || lock.RetryAfter <= 0 || lock.RetryAfter > p.Duration+time.Millisecond || d.RetryAfter != lock.RetryAfter {
		t.Fatalf("a locked lock-only rule beside a fresh one: %+v; want rejected by the lock, for at most %v", d, p.Duration)
	}
	if d := decide(t, s, lockOnly); d.Allowed || !d.Results[0].Locked || d.Results[0].RetryAfter > lock.RetryAfter {
		t.Fatalf("a locked lock-only rule alone: %+v; want rejected, for at most %v", d, lock.RetryAfter)
	}
	// All or none: the rejection left nothing in the fresh rule.
	if d := decide(t, s, fresh); !d.Allowed || d.Results[0].Count != 1 {
		t.Fatalf("the fresh rule after the rejection: %+v; want admitted as the first", d)
	}
	// Unlocked: admitted again, at once.
	if _, err := s.Clear(t.Context(), lockOnly.Name, lockOnly.ID); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, s, fresh, lockOnly); !d.Allowed || d.Results[0].Count != 2 || d.Results[1].Count != 0 {
		t.Fatalf("after Clear: %+v; want admitted", d)
	}

	if s.expiries == nil {
		return
	}
	// No log of the lock-only rule was ever written: its only keys are
	// the lockout's.
	for k := range s.expiries(t) {
		if strings.Contains(k, "{login_account:") && strings.HasSuffix(k, ":log3") {
			t.Errorf("key %q: a lock-only rule wrote a log", k)
		}
	}
}

// caseLimitChangedUnderConcurrency: requests decided at once under two
// limits of one rule (replicas during a change of its setting) each admit
// only while the log holds fewer than their own limit: the higher limit
// exactly, and none of the lower limit's admissions past its own count.
func caseLimitChangedUnderConcurrency(t *testing.T, s storeUnderTest) {
	const low, high, n = 4, 7, 60
	rule := func(i int) ratelimit.Rule {
		lim := ratelimit.PerMinute(high)
		if i%2 == 0 {
			lim = ratelimit.Limit{Count: low, Window: 10 * time.Minute}
		}
		return ratelimit.Rule{Name: "login_ip", ID: "198.51.100.40", Limit: lim}
	}
	got := burst(t, n, func(i int) (bool, error) {
		d, err := s.AllowAll(t.Context(), rule(i))
		if err == nil && d.Allowed && d.Results[0].Count > d.Results[0].Limit.Count {
			err = fmt.Errorf("admitted as %d under a limit of %d", d.Results[0].Count, d.Results[0].Limit.Count)
		}
		return d.Allowed, err
	})
	if got != high {
		t.Fatalf("%d requests under limits of %d and %d: admitted %d, want %d", n, low, high, got, high)
	}
	for i := range 2 {
		if d := decide(t, s, rule(i)); d.Allowed {
			t.Fatalf("after the burst, under %s: %+v; want rejected", rule(i).Limit, d)
		}
	}
}

// caseWindowChanged: a rule's window raised (a setting changed between
// requests) counts every request its log holds in the new window, whatever
// window wrote them, and one lowered counts only those in its own.
func caseWindowChanged(t *testing.T, s storeUnderTest) {
	// A second, not less: in Redis the first log lasts its short window
	// until the long window's first request moves its expiry, which a
	// loaded machine (a cluster's round trips) may take a while to send.
	short := ratelimit.Limit{Count: 3, Window: time.Second}
	long := ratelimit.Limit{Count: 3, Window: 10 * time.Minute}
	raised := ratelimit.Rule{Name: "login_ip", ID: "198.51.100.50", Limit: short}
	if d := decide(t, s, raised); !d.Allowed {
		t.Fatalf("first request: %+v", d)
	}
	raised.Limit = long
	for range 2 {
		if d := decide(t, s, raised); !d.Allowed {
			t.Fatalf("within the limit: %+v", d)
		}
	}
	time.Sleep(2 * short.Window)
	if d := decide(t, s, raised); d.Allowed || d.Results[0].Count != 3 {
		t.Fatalf("a fourth request within %s: %+v; want rejected at 3", long.Window, d)
	}

	lowered := ratelimit.Rule{Name: "login_ip", ID: "198.51.100.51", Limit: long}
	for range 3 {
		if d := decide(t, s, lowered); !d.Allowed {
			t.Fatalf("within the limit: %+v", d)
		}
	}
	time.Sleep(2 * short.Window)
	lowered.Limit = short
	if d := decide(t, s, lowered); !d.Allowed || d.Results[0].Count != 1 || d.Results[0].Remaining != 2 {
		t.Fatalf("a request with none in the last %s: %+v; want admitted as the first, 2 remaining", short.Window, d)
	}
}
