package main

import (
	"context"
	"encoding/json"
	"io"
	mathrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

func TestLimiterCompare(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	stdout, stderr, err := runStuffing(t, "limiter-compare", "--json", "--redis", testenv.RedisURL(), "--key-prefix", prefix,
		"--rounds", "3", "--duration", "20ms", "--clients", "1,3", "--keys", "1,50", "--seed", "42", "--alternate", "20")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rep limiterCompareReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if rep.Seed != 42 || rep.Rounds != 3 || len(rep.Cells) != 4 {
		t.Fatalf("report %+v: want seed 42, 3 rounds, 4 cells", rep)
	}
	for _, c := range rep.Cells {
		if len(c.Orders) != 3 {
			t.Errorf("cell %d clients, %d keys: %d rounds' orders, want 3", c.Clients, c.Keys, len(c.Orders))
		}
		for _, order := range c.Orders {
			if len(order) != len(lcContenders) {
				t.Errorf("cell %d/%d: round order %v, want every contender once", c.Clients, c.Keys, order)
			}
		}
		for _, name := range lcContenders {
			if len(c.Rates[name]) != 3 || c.MedianRates[name] <= 0 {
				t.Errorf("cell %d/%d: %s rates %v, median %v; want 3 positive", c.Clients, c.Keys, name, c.Rates[name], c.MedianRates[name])
			}
		}
		for _, p := range lcRatios {
			k := p[0] + "/" + p[1]
			if len(c.Ratios[k]) != 3 || c.MedianRatios[k] <= 0 {
				t.Errorf("cell %d/%d: ratios %s %v; want 3, median positive", c.Clients, c.Keys, k, c.Ratios[k])
			}
		}
	}
	if len(rep.Alternating) != 2 {
		t.Fatalf("%d cells of turns, want one per --keys count", len(rep.Alternating))
	}
	for _, a := range rep.Alternating {
		if a.Turns != 20 {
			t.Errorf("%d keys: %d turns, want 20", a.Keys, a.Turns)
		}
		for _, name := range lcContenders {
			if a.MedianLatency[name] <= 0 {
				t.Errorf("%d keys: %s median latency %v, want positive", a.Keys, name, a.MedianLatency[name])
			}
		}
		for _, p := range lcRatios {
			if a.MedianRatios[p[0]+"/"+p[1]] <= 0 {
				t.Errorf("%d keys: ratio %s/%s %v, want positive", a.Keys, p[0], p[1], a.MedianRatios[p[0]+"/"+p[1]])
			}
		}
	}
	// Every key is gone, redis_rate's (under its own "rate:") included.
	assertNoKeys(t, rdb, prefix)
	assertNoKeys(t, rdb, "rate:"+prefix)
}

func TestLimiterCompareFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--rounds", "0"},
		{"--limit", "0"},
		{"--alternate", "-1"},
		{"--duration", "1ms"},
		{"--clients", "5000"},
		{"--keys", "2000000"},
		{"--key-prefix", "a{b}"},
		{"--redis", "redis://192.0.2.1:6379/15"},
	} {
		_, stderr, err := runStuffing(t, append([]string{"limiter-compare"}, args...)...)
		if err == nil || !strings.Contains(stderr, "stuffing") {
			t.Errorf("limiter-compare %v: %v, %q; want a clear error", args, err, stderr)
		}
	}
}

// TestLimiterCompareText: the report as text has both tables, each with
// every ratio and every contender, and says its keys were deleted.
func TestLimiterCompareText(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	stdout, stderr, err := runStuffing(t, "limiter-compare", "--redis", testenv.RedisURL(), "--key-prefix", prefix,
		"--rounds", "1", "--duration", "20ms", "--clients", "1", "--keys", "1", "--seed", "42", "--alternate", "5")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	want := []string{"median of per-round ratios", "median decisions/s", "median of per-turn ratios", "median latency, µs", "deleted"}
	for _, p := range lcRatios {
		want = append(want, p[0]+" vs "+p[1])
	}
	for _, w := range want {
		if n := strings.Count(stdout, w); n == 0 {
			t.Errorf("report lacks %q:\n%s", w, stdout)
		}
	}
	// Each ratio is a row of both tables: a line of its own, right-aligned.
	for _, p := range lcRatios {
		if n := strings.Count(stdout, " "+p[0]+" vs "+p[1]+" "); n != 2 {
			t.Errorf("%q in %d tables, want 2:\n%s", p[0]+" vs "+p[1], n, stdout)
		}
	}
	assertNoKeys(t, rdb, prefix)
	assertNoKeys(t, rdb, "rate:"+prefix)
}

// TestLimiterContendersDecideWhatTheyName drives XCloak's contenders one
// identity each past their limit and reads what they left in Redis: a log
// per rule the contender names, each holding exactly the limit's entries
// (a rejection writes nothing), and no other log. A contender that lost a
// rule, or gained one, would compare something other than its name says.
func TestLimiterContendersDecideWhatTheyName(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	const limit = 3
	cmp, err := newLimiterComparison(rdb, prefix, limit)
	if err != nil {
		t.Fatal(err)
	}
	// A log is a 14-byte header and 4 bytes per entry at a window of a
	// minute (ratelimit/sliding_window.lua).
	const logBytes = 14 + 4*limit
	for name, wantLogs := range map[string][]string{
		lcAllow:    {"compare_allow"},
		lcTwoRules: {auth.RuleLoginAccount, auth.RuleLoginIP},
		lcSignIn:   {auth.RuleLoginAccount, auth.RuleLoginIP, auth.RuleLoginNetwork},
	} {
		id := "who-" + name
		for range limit + 2 {
			if err := cmp.decide[name](t.Context(), id); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		digest := ratelimit.Digest(id)
		var logs []string
		iter := rdb.Scan(t.Context(), 0, prefix+"*"+digest+"*", 0).Iterator()
		for iter.Next(t.Context()) {
			key := iter.Val()
			if !strings.HasSuffix(key, ":log3") {
				t.Errorf("%s: wrote %s, want logs only (a lock is written only by failures)", name, key)
				continue
			}
			kind, _, _ := strings.Cut(strings.TrimPrefix(key, prefix+"{"), ":")
			logs = append(logs, kind)
			if n := rdb.StrLen(t.Context(), key).Val(); n != logBytes {
				t.Errorf("%s: %s is %d bytes, want %d (%d entries)", name, key, n, logBytes, limit)
			}
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(logs)
		if !slices.Equal(logs, wantLogs) {
			t.Errorf("%s: logs of %v, want %v", name, logs, wantLogs)
		}
	}
}

// Cells of the same --keys count walk identities of their own: a cell that
// took up where another's left its logs would start each contender with
// as many entries as it made there, more for the faster ones.
func TestLimiterCellsHaveIdentitiesOfTheirOwn(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]map[string]bool{} // contender, id: called in the current cell
	lc := &limiterComparison{decide: map[string]func(context.Context, string) error{}}
	for _, name := range lcContenders {
		lc.decide[name] = func(_ context.Context, id string) error {
			mu.Lock()
			defer mu.Unlock()
			if seen[name] == nil {
				seen[name] = map[string]bool{}
			}
			seen[name][id] = true
			return nil
		}
	}
	rng := mathrand.New(mathrand.NewPCG(1, 0))
	if _, err := lc.cell(t.Context(), rng, 1, 5, 1, 10*time.Millisecond, io.Discard); err != nil {
		t.Fatal(err)
	}
	first := seen
	seen = map[string]map[string]bool{}
	if _, err := lc.cell(t.Context(), rng, 2, 5, 1, 10*time.Millisecond, io.Discard); err != nil {
		t.Fatal(err)
	}
	for name, ids := range seen {
		for id := range ids {
			if first[name][id] {
				t.Errorf("%s: identity %q decided in both cells", name, id)
			}
		}
	}
}

// The rounds' orders follow the seed alone: two runs with one seed
// shuffle alike, and another seed shuffles otherwise.
func TestLimiterCellOrdersFollowTheSeed(t *testing.T) {
	lc := &limiterComparison{decide: map[string]func(context.Context, string) error{}}
	for _, name := range lcContenders {
		lc.decide[name] = func(context.Context, string) error { return nil }
	}
	orders := func(seed uint64) [][]string {
		c, err := lc.cell(t.Context(), mathrand.New(mathrand.NewPCG(seed, 0)), 1, 1, 6, 10*time.Millisecond, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return c.Orders
	}
	a, b, other := orders(1717), orders(1717), orders(2026)
	if !slices.EqualFunc(a, b, slices.Equal) {
		t.Errorf("seed 1717 shuffled %v, then %v", a, b)
	}
	if slices.EqualFunc(a, other, slices.Equal) {
		t.Errorf("seeds 1717 and 2026 both shuffled %v", a)
	}
}
