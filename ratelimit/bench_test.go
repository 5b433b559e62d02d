package ratelimit_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
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

// benchClient returns a client with enough connections for 64 parallel
// callers, under a fresh prefix that the test environment cleans up.
func benchClient(b *testing.B) (*redis.Client, string) {
	_, prefix := testenv.Redis(b)
	opts, err := redis.ParseURL(testenv.RedisURL())
	if err != nil {
		b.Fatal(err)
	}
	opts.PoolSize = 128
	rdb := redis.NewClient(opts)
	b.Cleanup(func() { rdb.Close() })
	return rdb, prefix
}

// trivialScript is the ceiling: the cheapest possible EVALSHA with one key.
var trivialScript = redis.NewScript("return 1")

// BenchmarkDecision measures decisions per second and latency percentiles of
// XCloak's limiter next to the seed's check-then-act baseline, redis_rate's
// GCRA and a trivial EVALSHA, on one key (every call after the tenth is a
// rejection) and on 100,000 keys (mostly admissions), with 1 and 64 callers.
//
//	go test -run '^$' -bench Decision -benchtime 20000x ./ratelimit/
func BenchmarkDecision(b *testing.B) {
	rdb, prefix := benchClient(b)
	limiter := newLimiter(b, rdb, prefix)
	naive := baseline.NewCheckThenAct(rdb)
	gcra := redis_rate.NewLimiter(rdb)
	limit := ratelimit.PerMinute(10)

	deciders := []struct {
		name   string
		decide func(ctx context.Context, id string) error
	}{
		{"xcloak", func(ctx context.Context, id string) error {
			_, err := limiter.Allow(ctx, ratelimit.Rule{Name: "bench", ID: id, Limit: limit})
			return err
		}},
		// Two rules, the client's network and the account, in one script
		// (stuffing limiter-compare runs a sign-in's whole set of rules).
		{"xcloak_two_rules", func(ctx context.Context, id string) error {
			_, err := limiter.AllowAll(ctx,
				ratelimit.Rule{Name: "bench_ip", ID: id, Limit: limit},
				ratelimit.Rule{Name: "bench_account", ID: id, Limit: limit})
			return err
		}},
		{"baseline", func(ctx context.Context, id string) error {
			_, err := naive.Allow(ctx, prefix+"naive:"+id, limit.Count, limit.Window)
			return err
		}},
		{"redis_rate", func(ctx context.Context, id string) error {
			_, err := gcra.Allow(ctx, prefix+"gcra:"+id, redis_rate.PerMinute(limit.Count))
			return err
		}},
		{"evalsha", func(ctx context.Context, id string) error {
			return trivialScript.Run(ctx, rdb, []string{prefix + "trivial:" + id}).Err()
		}},
	}
	for _, d := range deciders {
		for _, keys := range []int{1, 100_000} {
			ids := make([]string, keys)
			for i := range ids {
				ids[i] = strconv.Itoa(i)
			}
			for _, clients := range []int{1, 64} {
				b.Run(fmt.Sprintf("%s/keys=%d/clients=%d", d.name, keys, clients), func(b *testing.B) {
					run(b, clients, func(ctx context.Context, i int) error { return d.decide(ctx, ids[i%keys]) })
				})
			}
		}
	}
}

// run spreads b.N calls over the given number of goroutines and reports
// throughput and the 50th and 99th percentile latency of one call.
func run(b *testing.B, clients int, call func(ctx context.Context, i int) error) {
	ctx := context.Background()
	var (
		next      atomic.Int64
		wg        sync.WaitGroup
		mu        sync.Mutex
		latencies = make([]time.Duration, 0, b.N)
		failed    atomic.Value
	)
	b.ResetTimer()
	start := time.Now()
	for range clients {
		wg.Go(func() {
			local := make([]time.Duration, 0, b.N/clients+1)
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					break
				}
				t0 := time.Now()
				if err := call(ctx, i); err != nil {
					failed.Store(err)
					break
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// BenchmarkKeyMemory reports the Redis memory one tracked identity costs
// (MEMORY USAGE, averaged over 1,000 keys filled to the limit), for XCloak's
// log at limits 10, 50 and 100 per 10 minutes (the sign-in rules' window)
// and for redis_rate's single GCRA value. The work is done once whatever b.N
// is:
//
//	go test -run '^$' -bench KeyMemory -benchtime 1x ./ratelimit/
func BenchmarkKeyMemory(b *testing.B) {
	rdb, prefix := benchClient(b)
	limiter := newLimiter(b, rdb, prefix)
	gcra := redis_rate.NewLimiter(rdb)
	ctx := context.Background()
	const keys = 1000
	perKey := func(b *testing.B, match string) {
		var total int64
		var n int
		iter := rdb.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			used, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
			if err != nil {
				b.Fatal(err)
			}
			total += used
			n++
		}
		if err := iter.Err(); err != nil || n != keys {
			b.Fatalf("found %d keys (%v), want %d", n, err, keys)
		}
		b.ReportMetric(float64(total)/float64(n), "bytes/key")
	}
	for _, limit := range []int{10, 50, 100} {
		b.Run(fmt.Sprintf("xcloak/limit=%d", limit), func(b *testing.B) {
			name := fmt.Sprintf("mem%d", limit)
			for k := range keys {
				rule := ratelimit.Rule{Name: name, ID: strconv.Itoa(k), Limit: ratelimit.Limit{Count: limit, Window: 10 * time.Minute}}
				for range limit {
					if _, err := limiter.Allow(ctx, rule); err != nil {
						b.Fatal(err)
					}
				}
			}
			perKey(b, prefix+"{"+name+":*")
		})
		b.Run(fmt.Sprintf("redis_rate/limit=%d", limit), func(b *testing.B) {
			for k := range keys {
				key := fmt.Sprintf("%sgcra%d:%d", prefix, limit, k)
				if _, err := gcra.AllowN(ctx, key, redis_rate.Limit{Rate: limit, Burst: limit, Period: 10 * time.Minute}, limit); err != nil {
					b.Fatal(err)
				}
			}
			// redis_rate puts its own "rate:" in front of every key.
			perKey(b, fmt.Sprintf("rate:%sgcra%d:*", prefix, limit))
		})
	}
}

// BenchmarkCall measures one caller's decisions one after another, without
// the bookkeeping of BenchmarkDecision, for profiles and allocations per
// call: XCloak's Allow, the AllowAll of an IPv4 sign-in with a password
// (four rules, the last two lockable: six keys) and redis_rate's Allow, on
// one identity (every call after the tenth a rejection) and on 100,000.
//
//	go test -run '^$' -bench Call -benchmem ./ratelimit/
func BenchmarkCall(b *testing.B) {
	rdb, prefix := benchClient(b)
	limiter := newLimiter(b, rdb, prefix)
	gcra := redis_rate.NewLimiter(rdb)
	limit := ratelimit.PerMinute(10)
	deciders := []struct {
		name   string
		decide func(ctx context.Context, id string) error
	}{
		{"allow", func(ctx context.Context, id string) error {
			_, err := limiter.Allow(ctx, ratelimit.Rule{Name: "bench", ID: id, Limit: limit})
			return err
		}},
		{"signin", func(ctx context.Context, id string) error {
			_, err := limiter.AllowAll(ctx,
				ratelimit.Rule{Name: "bench_ip", ID: id, Limit: limit},
				ratelimit.Rule{Name: "bench_network", ID: id, Limit: limit},
				ratelimit.Rule{Name: "bench_account", ID: id, Limit: limit, Lockable: true},
				ratelimit.Rule{Name: "bench_password", ID: id, Limit: limit, Lockable: true})
			return err
		}},
		{"redis_rate", func(ctx context.Context, id string) error {
			_, err := gcra.Allow(ctx, prefix+"gcra:"+id, redis_rate.PerMinute(limit.Count))
			return err
		}},
	}
	for _, d := range deciders {
		for _, keys := range []int{1, 100_000} {
			ids := make([]string, keys)
			for i := range ids {
				ids[i] = strconv.Itoa(i)
			}
			b.Run(fmt.Sprintf("%s/keys=%d", d.name, keys), func(b *testing.B) {
				ctx := context.Background()
				i := 0
				for b.Loop() {
					if err := d.decide(ctx, ids[i%keys]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

// BenchmarkAttemptInFlight measures what a password check's places
// towards the locks cost, the account's and the password's, taken apart
// from the sign-in's decision (BeginAttempt for each, after it) and taken
// with it (Rule.Place, in its script), each given back with EndAttempt,
// taking turns call by call (the machine's noise falls on both alike),
// and reports each one's time per sign-in:
//
//	go test ./ratelimit -run '^$' -bench AttemptInFlight -count 3
//
// decision-ns/op is the decision alone, and place-ns/op the two places
// taken apart after it and given back; apart-ns/op is their sum, and
// together-ns/op the decision that takes both places, and their giving
// back. Each turn is an identity of its own, as each sign-in's account is.
func BenchmarkAttemptInFlight(b *testing.B) {
	rdb, prefix := benchClient(b)
	policy := ratelimit.LockoutPolicy{Threshold: 10, Duration: 15 * time.Minute, MaxDuration: 24 * time.Hour}
	store, err := ratelimit.NewRedisStore(rdb, prefix, map[string]ratelimit.LockoutPolicy{
		"bench_account": policy, "bench_password": policy,
	})
	if err != nil {
		b.Fatal(err)
	}
	limit := ratelimit.PerMinute(10)
	ctx := context.Background()
	// A sign-in's rules: its address', its network's, its account's
	// (lockable) and its password's lock alone.
	rules := func(id string, places bool) []ratelimit.Rule {
		r := []ratelimit.Rule{
			{Name: "bench_ip", ID: id, Limit: limit},
			{Name: "bench_network", ID: id, Limit: limit},
			{Name: "bench_account", ID: id, Limit: limit, Lockable: true},
			{Name: "bench_password", ID: id, Lockable: true},
		}
		if places {
			r[2].Place = &ratelimit.Place{TTL: time.Minute}
			r[3].Place = &ratelimit.Place{Attempt: id, TTL: time.Minute}
		}
		return r
	}
	end := func(id string, tokens ...string) {
		for i, name := range []string{"bench_account", "bench_password"} {
			if err := store.EndAttempt(ctx, name, id, tokens[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	apart := func(id string) (decision, place time.Duration) {
		start := time.Now()
		if d, err := store.AllowAll(ctx, rules(id, false)...); err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
		begin := time.Now()
		var tokens []string
		for _, r := range []struct{ name, attempt string }{{"bench_account", ""}, {"bench_password", id}} {
			begun, err := store.BeginAttempt(ctx, r.name, id, r.attempt, time.Minute)
			if err != nil || !begun.Allowed {
				b.Fatal(begun, err)
			}
			tokens = append(tokens, begun.Token)
		}
		end(id, tokens...)
		return begin.Sub(start), time.Since(begin)
	}
	together := func(id string) time.Duration {
		start := time.Now()
		d, err := store.AllowAll(ctx, rules(id, true)...)
		if err != nil || !d.Allowed || d.Results[2].Token == "" || d.Results[3].Token == "" {
			b.Fatal(d, err)
		}
		end(id, d.Results[2].Token, d.Results[3].Token)
		return time.Since(start)
	}
	var decision, place, both time.Duration
	i := 0
	for b.Loop() {
		// Each first in every other turn.
		a, t := strconv.Itoa(2*i), strconv.Itoa(2*i+1)
		if i%2 == 0 {
			d, p := apart(a)
			decision, place, both = decision+d, place+p, both+together(t)
		} else {
			both += together(t)
			d, p := apart(a)
			decision, place = decision+d, place+p
		}
		i++
	}
	n := float64(b.N)
	b.ReportMetric(float64(decision.Nanoseconds())/n, "decision-ns/op")
	b.ReportMetric(float64(place.Nanoseconds())/n, "place-ns/op")
	b.ReportMetric(float64((decision+place).Nanoseconds())/n, "apart-ns/op")
	b.ReportMetric(float64(both.Nanoseconds())/n, "together-ns/op")
}
