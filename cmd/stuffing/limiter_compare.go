package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/cli"
	"github.com/xcloak/xcloak/ratelimit"
)

const limiterCompareDescription = `Measures decisions per second of XCloak's limiter beside redis_rate and a
trivial script, interleaved: in each cell (callers x identities) every round
runs each contender once for --duration, in an order shuffled with --seed,
and the report gives the median of the per-round ratios. On a machine shared
with other work a quiet or a noisy moment then touches every contender alike.

Contenders:
  allow       XCloak's Limiter.Allow, one rule
  signin      XCloak's Limiter.AllowAll with the rules an IPv4 sign-in with a
              password passes: login_ip, login_network and login_account
              (lockable), each at --limit, and login_password, lock-only
              as in auth's table (its lock alone, no limit)
  two_rules   XCloak's Limiter.AllowAll with two plain rules at --limit,
              login_ip and login_account: a decision of more than one
              rule in one script, without the locks and the other logs
              a sign-in has since taken on
  redis_rate  github.com/go-redis/redis_rate/v10 (GCRA), Allow at --limit
  evalsha     a script that only returns 1, with one key: the ceiling
  floor_allow, floor_signin
              scripts that do only the key work of an admission, and
              decide nothing: read the rule's key and write it with an
              expiry; read the sign-in's five keys (three logs, two
              locks) and write its three logs. With 100,000 identities,
              where nearly every decision admits, floor_signin vs allow
              is the most any script keeping those logs could reach
              against a single rule: it is a sign-in that costs nothing
              to decide

With --alternate N, one caller then also runs N turns per --keys count,
every contender once per turn in an order shuffled each turn, and the
report gives the median of the per-turn ratios of their latencies: with
one caller a decision is a round trip that waits on the operating
system's wake-ups, which shift between rounds more than the contenders
differ, and taking turns call by call puts every contender in the same
moment.

Every limit is --limit per minute. With 1 identity every decision after the
limit's is a rejection; with 100,000 nearly every one is an admission. The
keys live under a run prefix in the Redis of --redis (database 15 by
default, which tests do not use) and are deleted at the end.
`

// Limiter contender names.
const (
	lcAllow     = "allow"
	lcSignIn    = "signin"
	lcTwoRules  = "two_rules"
	lcRedisRate = "redis_rate"
	lcEvalSHA   = "evalsha"
	lcFloorOne  = "floor_allow"
	lcFloorSign = "floor_signin"
)

var lcContenders = []string{lcAllow, lcSignIn, lcTwoRules, lcRedisRate, lcEvalSHA, lcFloorOne, lcFloorSign}

// lcRatios are the ratios the report gives, numerator over denominator.
var lcRatios = [][2]string{
	{lcAllow, lcRedisRate},
	{lcAllow, lcEvalSHA},
	{lcSignIn, lcEvalSHA},
	{lcSignIn, lcAllow},
	{lcTwoRules, lcAllow},
	{lcFloorSign, lcFloorOne},
	{lcFloorSign, lcAllow},
}

// redisRatePrefix is what redis_rate puts before every key it is given.
const redisRatePrefix = "rate:"

// trivialLimiterScript is the cheapest script with one key.
var trivialLimiterScript = redis.NewScript("return 1")

// floorScript is an admission's key work and nothing else: one read of
// every key, as the limiter's one MGET, then each of the first ARGV[1]
// keys written with an expiry, as a log of 10 entries would be.
var floorScript = redis.NewScript(`
local values = redis.call('MGET', unpack(KEYS))
for i = 1, tonumber(ARGV[1]) do
  redis.call('SET', KEYS[i], '0123456789abcdef0123456789abcdef0123456789abcdef0123456', 'PX', 60000)
end
return 1`)

// limiterCell is one cell of the comparison: how many callers at once
// over how many identities, and what each round measured.
type limiterCell struct {
	Clients int `json:"clients"`
	Keys    int `json:"keys"`
	// Orders is the order of the contenders in each round.
	Orders [][]string `json:"orders"`
	// Rates is decisions per second of each contender, one per round.
	Rates map[string][]float64 `json:"decisions_per_second"`
	// MedianRates is the median of each contender's Rates.
	MedianRates map[string]float64 `json:"median_decisions_per_second"`
	// Ratios holds, under "a/b", a's rate over b's in each round, and
	// MedianRatios their medians: the comparison's figures.
	Ratios       map[string][]float64 `json:"ratios"`
	MedianRatios map[string]float64   `json:"median_ratios"`
}

// limiterCompareReport is what "stuffing limiter-compare" prints.
type limiterCompareReport struct {
	Redis      string        `json:"redis"`
	Seed       uint64        `json:"seed"`
	Rounds     int           `json:"rounds"`
	Duration   string        `json:"duration_per_run"`
	Limit      string        `json:"limit"`
	CPUs       int           `json:"cpus"`
	LoadBefore string        `json:"load_average_before"`
	LoadAfter  string        `json:"load_average_after"`
	Cells      []limiterCell `json:"cells"`
	// Alternating holds, with --alternate, one caller's turns per --keys
	// count.
	Alternating []alternatingCell `json:"alternating,omitempty"`
}

// alternatingCell is one caller taking turns over keys identities: each
// turn calls every contender once, in a shuffled order.
type alternatingCell struct {
	Keys  int `json:"keys"`
	Turns int `json:"turns"`
	// MedianLatency is each contender's median call, in microseconds.
	MedianLatency map[string]float64 `json:"median_latency_us"`
	// MedianRatios holds, under "a/b", the median over turns of b's
	// latency over a's: a's rate over b's, as in the cells.
	MedianRatios map[string]float64 `json:"median_ratios"`
}

func limiterCompareCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("stuffing", "limiter-compare", "[flags]", limiterCompareDescription)
	f := addRedisCompareFlags(fs, 5, 2*time.Second, "stuffing:compare:", "rounds per cell, each running every contender once")
	clients := intList{1, 64}
	fs.Var(&clients, "clients", "comma-separated `counts` of callers at once, one cell each")
	keys := intList{1, 100_000}
	fs.Var(&keys, "keys", "comma-separated `counts` of identities the calls cycle over, one cell each")
	alternate := fs.Int("alternate", 0, "then `n` turns of one caller per --keys count, every contender once per turn (0: none)")
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := f.check(stderr); err != nil {
		return err
	}
	if *alternate < 0 || *alternate > 1_000_000 {
		return badFlag(stderr, "--alternate %d out of range 0..1000000", *alternate)
	}
	for _, c := range clients {
		if c > maxWorkers {
			return badFlag(stderr, "--clients %d above %d", c, maxWorkers)
		}
	}
	for _, k := range keys {
		if k > 1_000_000 {
			return badFlag(stderr, "--keys %d above 1000000", k)
		}
	}
	rdb, where, prefix, err := f.start(ctx, stderr, 2*slices.Max(clients))
	if err != nil {
		return err
	}
	defer rdb.Close()

	progress := f.progress(stdout, stderr)
	lc, err := newLimiterComparison(rdb, prefix, f.limit)
	if err != nil {
		return err
	}
	rep := limiterCompareReport{Redis: where, Seed: f.seed, Rounds: f.rounds, Duration: f.duration.String(),
		Limit: ratelimit.PerMinute(f.limit).String(), CPUs: runtime.NumCPU(), LoadBefore: loadAverage()}
	rng := mathrand.New(mathrand.NewPCG(f.seed, 0))
	var runErr error
	for _, k := range keys {
		for _, c := range clients {
			cell, err := lc.cell(ctx, rng, c, k, f.rounds, f.duration, progress)
			if err != nil {
				runErr = err
				break
			}
			rep.Cells = append(rep.Cells, cell)
		}
		if runErr != nil {
			break
		}
	}
	for _, k := range keys {
		if runErr != nil || *alternate == 0 {
			break
		}
		a, err := lc.alternate(ctx, rng, k, *alternate, progress)
		if err != nil {
			runErr = err
			break
		}
		rep.Alternating = append(rep.Alternating, a)
	}
	rep.LoadAfter = loadAverage()
	// redis_rate's keys are under its own "rate:".
	return f.finish(ctx, rdb, stdout, runErr, rep, rep.print, prefix, redisRatePrefix+prefix)
}

// limiterComparison holds the contenders of one run.
type limiterComparison struct {
	decide map[string]func(ctx context.Context, id string) error
	// cells counts the cells and turns measured so far: each walks
	// identities named after it, so that none starts on the logs an
	// earlier one left, fuller for the contenders that ran faster there.
	cells int
}

// cellIDs returns keys identities no earlier cell or turn of lc used.
func (lc *limiterComparison) cellIDs(keys int) []string {
	lc.cells++
	ids := make([]string, keys)
	for i := range ids {
		ids[i] = "c" + strconv.Itoa(lc.cells) + ":id" + strconv.Itoa(i)
	}
	return ids
}

func newLimiterComparison(rdb redis.UniversalClient, prefix string, limit int) (*limiterComparison, error) {
	l, err := ratelimit.NewLimiter(rdb, prefix)
	if err != nil {
		return nil, err
	}
	gcra := redis_rate.NewLimiter(rdb)
	lim := ratelimit.PerMinute(limit)
	// login_password as auth's table has it: lock-only, or at --limit
	// were it given a limit of its own.
	var pwLimit ratelimit.Limit
	if spec, _ := auth.LookupRule(auth.RuleLoginPassword); !spec.LockOnly {
		pwLimit = lim
	}
	return &limiterComparison{decide: map[string]func(context.Context, string) error{
		lcAllow: func(ctx context.Context, id string) error {
			_, err := l.Allow(ctx, ratelimit.Rule{Name: "compare_allow", ID: id, Limit: lim})
			return err
		},
		// The rules of an IPv4 sign-in with a password (auth/rules.go,
		// FlowSignIn): the address, its /24, the account and the
		// password, the last two lockable, the password's lock-only.
		// Their own names, so that each keeps its own keys, as in a
		// sign-in.
		lcSignIn: func(ctx context.Context, id string) error {
			_, err := l.AllowAll(ctx,
				ratelimit.Rule{Name: auth.RuleLoginIP, ID: id, Limit: lim},
				ratelimit.Rule{Name: auth.RuleLoginNetwork, ID: id, Limit: lim},
				ratelimit.Rule{Name: auth.RuleLoginAccount, ID: id, Limit: lim, Lockable: true},
				ratelimit.Rule{Name: auth.RuleLoginPassword, ID: id, Limit: pwLimit, Lockable: true})
			return err
		},
		lcTwoRules: func(ctx context.Context, id string) error {
			_, err := l.AllowAll(ctx,
				ratelimit.Rule{Name: auth.RuleLoginIP, ID: id, Limit: lim},
				ratelimit.Rule{Name: auth.RuleLoginAccount, ID: id, Limit: lim})
			return err
		},
		lcRedisRate: func(ctx context.Context, id string) error {
			_, err := gcra.Allow(ctx, prefix+"gcra:"+id, redis_rate.PerMinute(limit))
			return err
		},
		lcEvalSHA: func(ctx context.Context, id string) error {
			return trivialLimiterScript.Run(ctx, rdb, []string{prefix + "trivial:" + id}).Err()
		},
		lcFloorOne: func(ctx context.Context, id string) error {
			return floorScript.Run(ctx, rdb, []string{prefix + "floor:" + id}, 1).Err()
		},
		lcFloorSign: func(ctx context.Context, id string) error {
			k := prefix + "floor:" + id + ":"
			return floorScript.Run(ctx, rdb, []string{k + "ip", k + "net", k + "account", k + "account:lock", k + "password:lock"}, 3).Err()
		},
	}}, nil
}

// cell measures every contender in rounds with clients callers over keys
// identities of the cell's own. Each contender walks its own identities
// in order, across rounds, so that all of them see the same mix of
// admissions and rejections.
func (lc *limiterComparison) cell(ctx context.Context, rng *mathrand.Rand, clients, keys, rounds int, d time.Duration, progress io.Writer) (limiterCell, error) {
	c := limiterCell{Clients: clients, Keys: keys, Rates: map[string][]float64{}, MedianRates: map[string]float64{},
		Ratios: map[string][]float64{}, MedianRatios: map[string]float64{}}
	ids := lc.cellIDs(keys)
	next := map[string]*atomic.Int64{}
	for _, name := range lcContenders {
		next[name] = new(atomic.Int64)
		// A first short run opens the connections and loads the scripts,
		// on the identities the rounds then walk on from: started afresh,
		// they would find their first ones fuller, the more so the
		// faster the contender.
		if _, err := lc.measure(ctx, name, clients, min(d, 200*time.Millisecond), ids, next[name]); err != nil {
			return c, err
		}
	}
	fmt.Fprintf(progress, "%s, %s:", plural(clients, "client"), plural(keys, "key"))
	for range rounds {
		order := append([]string(nil), lcContenders...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		c.Orders = append(c.Orders, order)
		rates := map[string]float64{}
		for _, name := range order {
			r, err := lc.measure(ctx, name, clients, d, ids, next[name])
			if err != nil {
				return c, err
			}
			rates[name] = r
			c.Rates[name] = append(c.Rates[name], r)
		}
		for _, p := range lcRatios {
			k := p[0] + "/" + p[1]
			c.Ratios[k] = append(c.Ratios[k], rates[p[0]]/rates[p[1]])
		}
		fmt.Fprintf(progress, " %.2fx", rates[lcAllow]/rates[lcRedisRate])
	}
	fmt.Fprintln(progress, " (allow/redis_rate per round)")
	for name, rs := range c.Rates {
		c.MedianRates[name] = median(rs)
	}
	for k, rs := range c.Ratios {
		c.MedianRatios[k] = median(rs)
	}
	return c, nil
}

// alternate has one caller take turns over keys identities: each turn
// calls every contender once, in an order shuffled each turn, each
// contender walking its own identities. A turn's ratio "a/b" is b's call's
// latency over a's.
func (lc *limiterComparison) alternate(ctx context.Context, rng *mathrand.Rand, keys, turns int, progress io.Writer) (alternatingCell, error) {
	c := alternatingCell{Keys: keys, Turns: turns, MedianLatency: map[string]float64{}, MedianRatios: map[string]float64{}}
	ids := lc.cellIDs(keys)
	next := map[string]int{}
	latency := map[string][]float64{}
	ratios := map[string][]float64{}
	took := map[string]float64{}
	order := append([]string(nil), lcContenders...)
	fmt.Fprintf(progress, "1 client taking turns, %s: %d turns\n", plural(keys, "key"), turns)
	for range turns {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, name := range order {
			id := ids[next[name]%len(ids)]
			next[name]++
			start := time.Now()
			if err := lc.decide[name](ctx, id); err != nil {
				return c, fmt.Errorf("%s: %w", name, err)
			}
			took[name] = float64(time.Since(start).Nanoseconds()) / 1e3
			latency[name] = append(latency[name], took[name])
		}
		for _, p := range lcRatios {
			k := p[0] + "/" + p[1]
			ratios[k] = append(ratios[k], took[p[1]]/took[p[0]])
		}
	}
	for name, ls := range latency {
		c.MedianLatency[name] = median(ls)
	}
	for k, rs := range ratios {
		c.MedianRatios[k] = median(rs)
	}
	return c, nil
}

// measure runs contender name with clients callers for d and returns its
// decisions per second. next is where the contender's walk over ids is.
func (lc *limiterComparison) measure(ctx context.Context, name string, clients int, d time.Duration, ids []string, next *atomic.Int64) (float64, error) {
	decide := lc.decide[name]
	_, rate, err := callFor(ctx, clients, d, func() error {
		return decide(ctx, ids[int(next.Add(1)-1)%len(ids)])
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return rate, nil
}

// callFor has clients callers call call over and over for d, and returns
// how many calls they made and the calls per second: the first error, or
// the context's, ends the run.
func callFor(ctx context.Context, clients int, d time.Duration, call func() error) (int64, float64, error) {
	var (
		wg    sync.WaitGroup
		calls atomic.Int64
		once  sync.Once
		first error
	)
	start := time.Now()
	end := start.Add(d)
	for range clients {
		wg.Go(func() {
			n := 0
			for time.Now().Before(end) && ctx.Err() == nil {
				if err := call(); err != nil {
					once.Do(func() { first = err })
					return
				}
				n++
			}
			calls.Add(int64(n))
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(first, ctx.Err()); err != nil {
		return 0, 0, err
	}
	return calls.Load(), float64(calls.Load()) / elapsed.Seconds(), nil
}

func (r *limiterCompareReport) print(w io.Writer, prefix string) {
	fmt.Fprintf(w, "Redis        %s, limit %s\n", r.Redis, r.Limit)
	fmt.Fprintf(w, "rounds       %d of %s per contender, order shuffled with --seed %d\n", r.Rounds, r.Duration, r.Seed)
	fmt.Fprintf(w, "load average %s before, %s after (%d CPUs)\n\n", r.LoadBefore, r.LoadAfter, r.CPUs)
	cols := make([]string, len(r.Cells))
	for i, c := range r.Cells {
		cols[i] = plural(c.Clients, "client") + ", " + plural(c.Keys, "key")
	}
	printTable(w, "median of per-round ratios", cols, func(i int, k string) float64 { return r.Cells[i].MedianRatios[k] },
		"median decisions/s", func(i int, name string) string { return thousands(r.Cells[i].MedianRates[name]) })
	fmt.Fprintln(w)
	for _, c := range r.Cells {
		fmt.Fprintf(w, "%s, %s: allow/redis_rate per round %s\n", plural(c.Clients, "client"), plural(c.Keys, "key"),
			joinFloats(c.Ratios[lcAllow+"/"+lcRedisRate], twoDecimals))
	}
	if len(r.Alternating) > 0 {
		fmt.Fprintf(w, "\none caller, every contender once per turn (%d turns per cell)\n", r.Alternating[0].Turns)
		cols := make([]string, len(r.Alternating))
		for i, a := range r.Alternating {
			cols[i] = plural(a.Keys, "key")
		}
		printTable(w, "median of per-turn ratios", cols, func(i int, k string) float64 { return r.Alternating[i].MedianRatios[k] },
			"median latency, µs", func(i int, name string) string { return fmt.Sprintf("%.1f", r.Alternating[i].MedianLatency[name]) })
	}
	fmt.Fprintf(w, "keys under %s deleted\n", prefix)
}

// printTable writes one of the report's tables: a column per cell
// (cols), under ratioHead a row per ratio of lcRatios (ratio of column i
// and "a/b"), then under valueHead a row per contender (value of column i
// and the contender's name).
func printTable(w io.Writer, ratioHead string, cols []string, ratio func(i int, key string) float64,
	valueHead string, value func(i int, name string) string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, ratioHead+"\t"+strings.Join(cols, "\t")+"\t")
	for _, p := range lcRatios {
		line := p[0] + " vs " + p[1] + "\t"
		for i := range cols {
			line += fmt.Sprintf("%.2fx\t", ratio(i, p[0]+"/"+p[1]))
		}
		fmt.Fprintln(tw, line)
	}
	fmt.Fprintln(tw, valueHead+"\t")
	for _, name := range lcContenders {
		line := name + "\t"
		for i := range cols {
			line += value(i, name) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
}

// plural writes n and noun, with an s unless n is 1: "64 clients".
func plural(n int, noun string) string {
	s := thousands(float64(n)) + " " + noun
	if n != 1 {
		s += "s"
	}
	return s
}
