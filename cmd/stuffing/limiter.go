package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/cli"
	"github.com/xcloak/xcloak/ratelimit"
	"github.com/xcloak/xcloak/ratelimit/baseline"
)

const limiterDescription = `Fires bursts of concurrent requests at one identity, released at once, at
the seed's check-then-act limiter (baseline), optionally at the seed's own
Lua script, and at XCloak's limiter, for every concurrency level and limit
given, several trials each. Prints how many requests each admitted against
the limit. Every trial uses fresh keys under a run prefix and deletes them
afterwards (the seed's limiters leave keys without expiry).

Exits with status 1 if XCloak ever admits anything but min(concurrency,
limit) or any request to the baseline or XCloak fails.
`

// limiterWindow is every limiter's window; a burst lasts milliseconds, so
// nothing leaves the window during a trial.
const limiterWindow = time.Minute

// limiterRow is one line of the table and one object of --json.
type limiterRow struct {
	Topology    string `json:"topology"`
	Concurrency int    `json:"concurrency"`
	Limit       int    `json:"limit"`
	Trials      int    `json:"trials"`
	// Expected is what an exact limiter admits: min(concurrency, limit).
	Expected int `json:"expected"`

	limiterOutcome `json:"-"`
	// Admitted counts are the worst trial (see worst); the _trials
	// arrays hold every trial.
	BaselineAdmitted int     `json:"baseline_admitted"`
	BaselineTrials   []int   `json:"baseline_trials"`
	BaselineErrors   int     `json:"baseline_errors"`
	BaselineRatio    float64 `json:"baseline_ratio"`

	SeedAdmitted *int     `json:"seed_admitted,omitempty"`
	SeedTrials   []int    `json:"seed_trials,omitempty"`
	SeedErrors   *int     `json:"seed_errors,omitempty"`
	SeedRatio    *float64 `json:"seed_ratio,omitempty"`

	XCloakAdmitted int     `json:"xcloak_admitted"`
	XCloakTrials   []int   `json:"xcloak_trials"`
	XCloakErrors   int     `json:"xcloak_errors"`
	XCloakRatio    float64 `json:"xcloak_ratio"`
}

// limiterOutcome keeps the first error of each limiter, for the notes
// under the table.
type limiterOutcome struct {
	baselineErr, seedErr, xcloakErr error
}

// worst returns the trial farthest from want, an over-admission winning a
// tie: for a limiter, admitting too many is the failure that matters.
func worst(trials []int, want int) int {
	w := trials[0]
	for _, n := range trials[1:] {
		d, dw := abs(n-want), abs(w-want)
		if d > dw || (d == dw && n > w) {
			w = n
		}
	}
	return w
}

func abs(n int) int { return max(n, -n) }

func limiterCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("stuffing", "limiter", "[flags]", limiterDescription)
	redisURL := fs.String("redis", "", "`URL` of one Redis (default "+defaultRedisURL+")")
	var cluster stringList
	fs.Var(&cluster, "cluster", "comma-separated `host:port` seeds of a Redis Cluster, instead of --redis")
	concurrency := intList{10, 100, 1000}
	fs.Var(&concurrency, "concurrency", "comma-separated `counts` of concurrent requests per burst")
	limits := intList{10}
	fs.Var(&limits, "limits", "comma-separated `limits` (requests per minute) to burst against")
	trials := fs.Int("trials", 5, "bursts per row and limiter (`n`)")
	seed := fs.Bool("seed-script", false, "also burst at the seed's Lua script; its errors are counted, not fatal")
	pool := fs.Int("pool", 0, "Redis connections per node (`n`); 0 means one per concurrent request, up to 1000")
	jsonOut := fs.Bool("json", false, "print a JSON array with one object per row instead of the table")
	base := fs.String("key-prefix", "stuffing:", "start of the run's key `prefix`; random hex and ':' are added")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound on the whole run (at most 10m)")
	allow := fs.Bool("allow-non-loopback", false, "allow a Redis that is not on this machine's loopback")
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	switch {
	case *redisURL != "" && len(cluster) > 0:
		return badFlag(stderr, "give --redis or --cluster, not both")
	case *trials < 1 || *trials > maxTrials:
		return badFlag(stderr, "--trials %d out of range 1..%d", *trials, maxTrials)
	case *pool < 0 || *pool > maxConcurrency:
		return badFlag(stderr, "--pool %d out of range 0..%d", *pool, maxConcurrency)
	}
	for _, c := range concurrency {
		if c > maxConcurrency {
			return badFlag(stderr, "--concurrency %d above %d", c, maxConcurrency)
		}
	}
	for _, l := range limits {
		if l > ratelimit.MaxCount {
			return badFlag(stderr, "--limits %d above %d", l, ratelimit.MaxCount)
		}
	}
	if err := inBounds("timeout", *timeout, time.Second, maxDuration); err != nil {
		return badFlag(stderr, "%v", err)
	}
	if *redisURL == "" {
		*redisURL = defaultRedisURL
	}
	prefix, err := newRunPrefix(*base)
	if err != nil {
		return badFlag(stderr, "%v", err)
	}
	if *pool == 0 {
		*pool = min(1000, slices.Max(concurrency))
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	target := redisTarget{url: *redisURL, cluster: cluster, pool: *pool, allow: *allow}
	rdb, where, err := target.connect(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()

	b := &bursts{
		rdb:      rdb,
		prefix:   prefix,
		naive:    baseline.NewCheckThenAct(rdb),
		seed:     baseline.NewSeedScript(rdb),
		withSeed: *seed,
		progress: stderr,
	}
	if b.xcloak, err = ratelimit.NewLimiter(rdb, prefix); err != nil {
		return err
	}
	topology := "redis"
	if len(cluster) > 0 {
		topology = "cluster"
	}
	var rows []limiterRow
	var runErr error
	for _, c := range concurrency {
		for _, l := range limits {
			row, err := b.row(ctx, topology, c, l, *trials)
			if err != nil {
				runErr = err
				break
			}
			rows = append(rows, row)
		}
		if runErr != nil {
			break
		}
	}
	// Clean up even after a failure or an interrupt, on a fresh context.
	cleanCtx, cancelClean := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancelClean()
	left, cleanErr := deletePrefixed(cleanCtx, rdb, prefix)
	if runErr != nil {
		return runErr
	}
	if cleanErr != nil {
		return fmt.Errorf("deleting the run's keys %s*: %w", prefix, cleanErr)
	}

	if *jsonOut {
		if err := writeJSON(stdout, rows); err != nil {
			return err
		}
	} else {
		printLimiterTable(stdout, where, prefix, *trials, *pool, *seed, rows, left)
	}
	return verdict(rows)
}

// verdict fails the run if XCloak was not exact or a request failed.
func verdict(rows []limiterRow) error {
	var problems []string
	for _, r := range rows {
		for _, n := range r.XCloakTrials {
			if n != r.Expected {
				problems = append(problems, fmt.Sprintf("XCloak admitted %d at concurrency %d, limit %d; want %d", n, r.Concurrency, r.Limit, r.Expected))
				break
			}
		}
		if r.XCloakErrors > 0 {
			problems = append(problems, fmt.Sprintf("%d XCloak requests failed at concurrency %d, limit %d: %v", r.XCloakErrors, r.Concurrency, r.Limit, r.xcloakErr))
		}
		if r.BaselineErrors > 0 {
			problems = append(problems, fmt.Sprintf("%d baseline requests failed at concurrency %d, limit %d: %v", r.BaselineErrors, r.Concurrency, r.Limit, r.baselineErr))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// bursts runs the trials of one run.
type bursts struct {
	rdb      redis.UniversalClient
	prefix   string
	naive    *baseline.CheckThenAct
	seed     *baseline.SeedScript
	xcloak   *ratelimit.Limiter
	withSeed bool
	progress io.Writer
}

// ruleName is the name of the XCloak rule the bursts hit.
const ruleName = "stuffing"

// row runs every trial of one concurrency and limit.
func (b *bursts) row(ctx context.Context, topology string, concurrency, limit, trials int) (limiterRow, error) {
	r := limiterRow{Topology: topology, Concurrency: concurrency, Limit: limit, Trials: trials, Expected: min(concurrency, limit)}
	if err := b.warm(ctx, concurrency); err != nil {
		return r, fmt.Errorf("opening connections: %w", err)
	}
	var seedAdmitted []int
	var seedErrors int
	for trial := range trials {
		id := fmt.Sprintf("c%d:l%d:t%d", concurrency, limit, trial)
		naiveKey, seedKey := b.prefix+"baseline:"+id, b.prefix+"seed:"+id
		rule := ratelimit.Rule{Name: ruleName, ID: id, Limit: ratelimit.Limit{Count: limit, Window: limiterWindow}}

		n, errs, err := burst(ctx, concurrency, func(ctx context.Context) (bool, error) {
			return b.naive.Allow(ctx, naiveKey, limit, limiterWindow)
		})
		r.BaselineTrials, r.BaselineErrors = append(r.BaselineTrials, n), r.BaselineErrors+errs
		r.baselineErr = cmp(r.baselineErr, err)

		if b.withSeed {
			n, errs, err := burst(ctx, concurrency, func(ctx context.Context) (bool, error) {
				return b.seed.Allow(ctx, seedKey, limit, limiterWindow)
			})
			seedAdmitted, seedErrors = append(seedAdmitted, n), seedErrors+errs
			r.seedErr = cmp(r.seedErr, err)
		}

		n, errs, err = burst(ctx, concurrency, func(ctx context.Context) (bool, error) {
			res, err := b.xcloak.Allow(ctx, rule)
			return res.Allowed, err
		})
		r.XCloakTrials, r.XCloakErrors = append(r.XCloakTrials, n), r.XCloakErrors+errs
		r.xcloakErr = cmp(r.xcloakErr, err)

		if err := b.clean(ctx, naiveKey, seedKey, seedKey+":seq", rule); err != nil {
			return r, fmt.Errorf("deleting trial keys: %w", err)
		}
		if ctx.Err() != nil {
			return r, fmt.Errorf("stopped after %d of %d trials at concurrency %d: %w", trial+1, trials, concurrency, context.Cause(ctx))
		}
	}
	r.BaselineAdmitted = worst(r.BaselineTrials, r.Expected)
	r.BaselineRatio = ratio(r.BaselineAdmitted, limit)
	r.XCloakAdmitted = worst(r.XCloakTrials, r.Expected)
	r.XCloakRatio = ratio(r.XCloakAdmitted, limit)
	if b.withSeed {
		w := worst(seedAdmitted, r.Expected)
		rt := ratio(w, limit)
		r.SeedAdmitted, r.SeedTrials, r.SeedErrors, r.SeedRatio = &w, seedAdmitted, &seedErrors, &rt
	}
	fmt.Fprintf(b.progress, "concurrency %d, limit %d: baseline %v, XCloak %v\n", concurrency, limit, r.BaselineTrials, r.XCloakTrials)
	return r, nil
}

func ratio(n, limit int) float64 { return float64(n) / float64(limit) }

// cmp keeps the first error seen.
func cmp(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// warm opens up to n connections to every node before a row's bursts, so
// that dialling does not stretch the first trial.
func (b *bursts) warm(ctx context.Context, n int) error {
	ping := func(ctx context.Context, node *redis.Client) error {
		_, _, err := burst(ctx, n, func(ctx context.Context) (bool, error) {
			return true, node.Ping(ctx).Err()
		})
		return err
	}
	switch c := b.rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, ping)
	case *redis.Client:
		return ping(ctx, c)
	}
	return nil
}

// clean deletes one trial's keys, one command per key so that none spans
// cluster slots.
func (b *bursts) clean(ctx context.Context, naiveKey, seedKey, seqKey string, rule ratelimit.Rule) error {
	keys, err := ratelimit.NewKeys(b.prefix, rule.Name)
	if err != nil {
		return err
	}
	_, err = b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range []string{naiveKey, seedKey, seqKey, keys.Log(rule.ID)} {
			p.Unlink(ctx, k)
		}
		return nil
	})
	return err
}

// burst starts n goroutines, releases them at once, and counts how many
// allow admits and how many fail; firstErr is one of the failures.
func burst(ctx context.Context, n int, allow func(context.Context) (bool, error)) (admitted, failed int, firstErr error) {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		ok    atomic.Int64
		bad   atomic.Int64
		once  sync.Once
	)
	for range n {
		wg.Go(func() {
			<-start
			yes, err := allow(ctx)
			switch {
			case err != nil:
				bad.Add(1)
				once.Do(func() { firstErr = err })
			case yes:
				ok.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	return int(ok.Load()), int(bad.Load()), firstErr
}

func printLimiterTable(w io.Writer, where, prefix string, trials, pool int, seed bool, rows []limiterRow, left int) {
	fmt.Fprintf(w, "Admitted requests per burst against one identity on %s\n", where)
	fmt.Fprintf(w, "%d trials per row, window %s, %d connections per node; admitted shows min-max over trials, ratio the worst trial / limit\n\n", trials, limiterWindow, pool)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "concurrency\tlimit\tbaseline admitted\tratio\t"
	if seed {
		head += "seed script admitted\terrors\tratio\t"
	}
	fmt.Fprintln(tw, head+"XCloak admitted\tratio\t")
	for _, r := range rows {
		line := fmt.Sprintf("%d\t%d\t%s\t%.2fx\t", r.Concurrency, r.Limit, span(r.BaselineTrials), r.BaselineRatio)
		if seed {
			line += fmt.Sprintf("%s\t%d\t%.2fx\t", span(r.SeedTrials), *r.SeedErrors, *r.SeedRatio)
		}
		fmt.Fprintln(tw, line+fmt.Sprintf("%s\t%.2fx\t", span(r.XCloakTrials), r.XCloakRatio))
	}
	_ = tw.Flush()
	for _, r := range rows {
		if r.seedErr != nil {
			fmt.Fprintf(w, "\nseed script errors (first at concurrency %d): %v", r.Concurrency, r.seedErr)
			break
		}
	}
	fmt.Fprintf(w, "\nkeys under %s deleted", prefix)
	if left > 0 {
		fmt.Fprintf(w, " (%d found by the final sweep)", left)
	}
	fmt.Fprintln(w)
}

// span formats trial counts as "min-max", or one number when all agree.
func span(trials []int) string {
	lo, hi := trials[0], trials[0]
	for _, n := range trials {
		lo, hi = min(lo, n), max(hi, n)
	}
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}
