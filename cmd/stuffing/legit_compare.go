package main

import (
	"context"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xcloak/xcloak/internal/cli"
)

const legitCompareDescription = `Measures a returning user's sign-ins with and without a flood of
rejections, interleaved: every round runs a quiet phase (the legitimate user
alone) and a flood phase (the user beside an http attack at full speed),
each for --duration, in an order shuffled with --seed, and the report gives
the median over rounds of the ratio of the flood phase's p99 to the quiet
phase's of the same round, beside the pooled percentiles. On a machine
shared with other work a quiet or a noisy moment then touches both alike.

The user's browsers (--legit-users, from --legit-source and the addresses
below it) sign in once before the first round, as in an http run, and keep
their cookies throughout. Each flood phase attacks accounts of its own (the
addresses of --email-pattern after a prefix naming the run and the round),
so that every flood starts as a new attack does: its first attempts, up to
each account's limit, admitted and checked, then rejections. With
--same-accounts every flood attacks the same accounts, so that from the
second round on it is rejections alone: the steady state of a flood, without
its start. The flags are those of "stuffing http"; --duration is each
phase's.

The user signs in 2 x --rounds x --duration / --legit-interval times from
each address, so a server measured this way needs login_ip and login_device
limits above that (for example XCLOAK_LIMIT_LOGIN_IP=1000/10m and
XCLOAK_LIMIT_LOGIN_DEVICE=1000/10m); a sign-in they refuse shows in the
report as a failure. Exits with status 1 if a flooded account reached
password checking more often than --account-limit.

--before names a second XCloak, another build or another setting (its own
key prefix, the same returning user), whose quiet and flood phases run in
the same rounds: each round's four phases in an order shuffled with --seed.
Its figures are reported under "before", beside the medians over rounds of
the target's p99 over the before's, phase by phase: a before and after of
the returning user measured in one run.
`

// Phase names.
const (
	phaseQuiet = "quiet"
	phaseFlood = "flood"
)

// legitPhase is one phase of a round.
type legitPhase struct {
	Round  int         `json:"round"`
	Phase  string      `json:"phase"`
	Report *httpReport `json:"report"`
}

// legitRound is what a round measured of the returning user.
type legitRound struct {
	Order      []string `json:"order"`
	QuietP50Ms float64  `json:"quiet_p50_ms"`
	QuietP99Ms float64  `json:"quiet_p99_ms"`
	FloodP50Ms float64  `json:"flood_p50_ms"`
	FloodP99Ms float64  `json:"flood_p99_ms"`
	// P99Ratio and P50Ratio are the flood phase's over the quiet one's.
	P99Ratio            float64 `json:"p99_flood_over_quiet"`
	P50Ratio            float64 `json:"p50_flood_over_quiet"`
	RejectionsPerSecond float64 `json:"flood_rejections_per_second"`
}

// legitPooled is the returning user's sign-ins of every phase of a kind.
type legitPooled struct {
	Attempts  int     `json:"attempts"`
	Succeeded int     `json:"succeeded"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
}

// legitCompareReport is what "stuffing legit-compare" prints.
type legitCompareReport struct {
	Target        string  `json:"target"`
	Seed          uint64  `json:"seed"`
	Rounds        int     `json:"rounds"`
	PhaseSeconds  float64 `json:"phase_seconds"`
	LegitUsers    int     `json:"legit_users"`
	Source        string  `json:"legit_source"`
	LegitInterval string  `json:"legit_interval"`
	Workers       int     `json:"workers"`
	Accounts      int     `json:"accounts"`
	Passwords     int     `json:"passwords"`
	// SameAccounts: every flood attacked the same accounts (else new
	// ones each round).
	SameAccounts bool   `json:"same_accounts"`
	LoadBefore   string `json:"load_average_before"`
	LoadAfter    string `json:"load_average_after"`

	PerRound []legitRound `json:"per_round"`
	// MedianP99Ratio and MedianP50Ratio are the medians of the per-round
	// ratios: the comparison's figures.
	MedianP99Ratio float64     `json:"median_p99_flood_over_quiet"`
	MedianP50Ratio float64     `json:"median_p50_flood_over_quiet"`
	Quiet          legitPooled `json:"quiet_pooled"`
	Flood          legitPooled `json:"flood_pooled"`
	PooledP99Ratio float64     `json:"pooled_p99_flood_over_quiet"`
	// MedianRejectionsPerSecond is of the flood phases.
	MedianRejectionsPerSecond float64 `json:"median_flood_rejections_per_second"`
	// ReachedPerAccountMax is the most any flooded account reached
	// password checking in its phase; AccountsOverLimit counts those past
	// --account-limit.
	ReachedPerAccountMax int   `json:"reached_per_account_max"`
	AccountsOverLimit    int   `json:"accounts_over_limit"`
	ServerErrors         int64 `json:"attack_server_errors"`
	TransportErrors      int64 `json:"attack_transport_errors"`

	Phases []legitPhase `json:"phases"`

	// Before is --before's server, measured in the same rounds (its own
	// report, whose Phases and PerRound are its own).
	Before *legitCompareReport `json:"before,omitempty"`
	// Orders is, with --before, each round's order of its four phases,
	// the before's named "before/quiet" and "before/flood".
	Orders [][]string `json:"orders,omitempty"`
	// MedianQuietP99OverBefore and MedianFloodP99OverBefore are, with
	// --before, the medians over rounds of the target's p99 over the
	// before's in the same round, phase by phase.
	MedianQuietP99OverBefore float64 `json:"median_quiet_p99_over_before,omitempty"`
	MedianFloodP99OverBefore float64 `json:"median_flood_p99_over_before,omitempty"`
}

// legitSide is one server's part of a run: its settings, its report and
// browsers, and what its rounds measured so far.
type legitSide struct {
	// name starts its phases' names in a round's order ("" for --target,
	// "before/" for --before).
	name     string
	c        attackConfig
	rep      *legitCompareReport
	browsers []*http.Client
	round    legitRound

	quiet, flood           []time.Duration
	p99s, p50s, rejections []float64
}

func legitCompareCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("stuffing", "legit-compare", "--target URL --legit-email EMAIL --legit-password PASSWORD [flags]", legitCompareDescription)
	var c attackConfig
	target, legitSource, jsonOut := addAttackFlags(fs, &c)
	fs.Lookup("duration").Usage = "how long each phase lasts (at most 10m)"
	fs.Lookup("max-requests").Usage = "most attempts each flood phase sends (`n`, at least 1)"
	rounds := fs.Int("rounds", 6, "rounds, each a quiet and a flood phase (`n`, 1 to 50)")
	seed := fs.Uint64("seed", 0, "`seed` of the phases' order (0 picks one and prints it)")
	same := fs.Bool("same-accounts", false, "every flood phase attacks the same accounts, limited since the first round's")
	settle := fs.Duration("settle", time.Second, "pause between phases, for the server to write what a flood queued (0 to 1m)")
	before := fs.String("before", "", "base `URL` of a second XCloak whose phases run in the same rounds, reported as \"before\"")
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	switch {
	case c.legitEmail == "":
		return badFlag(stderr, "--legit-email and --legit-password are required: the returning user is what is measured")
	case c.maxRequests < 1:
		return badFlag(stderr, "--max-requests %d: want at least 1, the flood's", c.maxRequests)
	case *rounds < 1 || *rounds > 50:
		return badFlag(stderr, "--rounds %d out of range 1..50", *rounds)
	case *settle < 0 || *settle > time.Minute:
		return badFlag(stderr, "--settle %s out of range 0..1m", *settle)
	}
	bc := c
	if err := c.prepare(ctx, stderr, *target, *legitSource); err != nil {
		return err
	}
	if *before != "" {
		if err := bc.prepare(ctx, stderr, *before, *legitSource); err != nil {
			return err
		}
		if bc.target.String() == c.target.String() {
			return badFlag(stderr, "--before %s is --target: a before needs a server of its own", *before)
		}
	}
	if *seed == 0 {
		*seed = randomUint64()
	}
	progressOut := stdout
	if *jsonOut {
		progressOut = stderr
	}
	fmt.Fprintf(progressOut, "seed %d\n", *seed)

	newReport := func(c attackConfig) *legitCompareReport {
		return &legitCompareReport{Target: c.target.String(), Seed: *seed, Rounds: *rounds, PhaseSeconds: c.duration.Seconds(),
			LegitUsers: c.legitUsers, LegitInterval: c.legitInterval.String(), Workers: c.workers, Accounts: c.accounts,
			Passwords: c.passwords, SameAccounts: *same, LoadBefore: loadAverage()}
	}
	rep := newReport(c)
	sides := []*legitSide{{c: c, rep: rep}}
	if *before != "" {
		rep.Before = newReport(bc)
		sides = append(sides, &legitSide{name: "before/", c: bc, rep: rep.Before})
	}
	if err := runLegitRounds(ctx, sides, *settle, mathrand.New(mathrand.NewPCG(*seed, 0)), progressOut); err != nil {
		return err
	}
	rep.LoadAfter = loadAverage()
	over := rep.AccountsOverLimit
	if rep.Before != nil {
		rep.Before.LoadAfter = rep.LoadAfter
		over += rep.Before.AccountsOverLimit
	}
	if *jsonOut {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		rep.print(stdout, c)
		if rep.Before != nil {
			fmt.Fprintf(stdout, "\nbefore:\n")
			rep.Before.print(stdout, bc)
			fmt.Fprintf(stdout, "\nmedian of the rounds' ratios, %s over %s: quiet p99 %.2fx, flood p99 %.2fx\n",
				rep.Target, rep.Before.Target, rep.MedianQuietP99OverBefore, rep.MedianFloodP99OverBefore)
		}
	}
	if over > 0 {
		return fmt.Errorf("%d flooded accounts reached password checking more than %d times", over, c.accountLimit)
	}
	return nil
}

// runLegitRounds signs each side's browsers in and runs the rounds: in
// each, every side's quiet and flood phases, an http run each beside that
// side's browsers, in a shuffled order. The first side is the report's
// own; a second (--before) is also compared with it round by round.
func runLegitRounds(ctx context.Context, sides []*legitSide, settle time.Duration, rng *mathrand.Rand, progress io.Writer) error {
	for _, side := range sides {
		browsers, err := side.c.legitBrowsers(ctx)
		if err != nil {
			return err
		}
		defer closeIdle(browsers)
		side.browsers = browsers
	}
	// The flooded accounts are new to the servers on every run, and on
	// every round unless they are to be the same.
	runID := fmt.Sprintf("lc%08x", mathrand.Uint32())
	first := sides[0].rep
	var quietOver, floodOver []float64
	type step struct {
		side  *legitSide
		phase string
	}
	for r := range first.Rounds {
		var steps []step
		for _, side := range sides {
			side.round = legitRound{}
			steps = append(steps, step{side, phaseQuiet}, step{side, phaseFlood})
		}
		rng.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
		var order []string
		for i, st := range steps {
			if i > 0 || r > 0 {
				if !sleepUntil(ctx, time.Now().Add(settle)) {
					return ctx.Err()
				}
			}
			order = append(order, st.side.name+st.phase)
			fmt.Fprintf(progress, "round %d/%d, %s%s:\n", r+1, first.Rounds, st.side.name, st.phase)
			if err := st.side.runPhase(ctx, runID, r, st.phase, progress); err != nil {
				return err
			}
		}
		for _, side := range sides {
			side.endRound()
		}
		if len(sides) > 1 {
			first.Orders = append(first.Orders, order)
			a, b := sides[0].round, sides[1].round
			if a.QuietP99Ms > 0 && a.FloodP99Ms > 0 && b.QuietP99Ms > 0 && b.FloodP99Ms > 0 {
				quietOver = append(quietOver, a.QuietP99Ms/b.QuietP99Ms)
				floodOver = append(floodOver, a.FloodP99Ms/b.FloodP99Ms)
			}
		}
	}
	for _, side := range sides {
		side.end()
	}
	if len(sides) > 1 {
		first.MedianQuietP99OverBefore, first.MedianFloodP99OverBefore = median(quietOver), median(floodOver)
	}
	return nil
}

// runPhase runs round r's phase of side and adds what it measured.
func (side *legitSide) runPhase(ctx context.Context, runID string, r int, phase string, progress io.Writer) error {
	rep, round := side.rep, &side.round
	round.Order = append(round.Order, phase)
	pc := side.c
	if phase == phaseQuiet {
		pc.maxRequests = 0
	} else {
		// Accounts of this side's own: a flood is new to its server.
		tag := runID
		if side.name != "" {
			tag += "-" + strings.TrimSuffix(side.name, "/")
		}
		pc.emailPattern = fmt.Sprintf("%s-r%d-%s", tag, r+1, side.c.emailPattern)
		if rep.SameAccounts {
			pc.emailPattern = fmt.Sprintf("%s-%s", tag, side.c.emailPattern)
		}
	}
	pr := attackWith(ctx, pc, side.browsers, newProgress(progress, pc))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	rep.Phases = append(rep.Phases, legitPhase{Round: r + 1, Phase: phase, Report: pr})
	rep.Source = pr.Legit.Source
	samples := durations(pr.Legit.SamplesMs)
	pooled := &rep.Quiet
	if phase == phaseQuiet {
		side.quiet = append(side.quiet, samples...)
		round.QuietP50Ms, round.QuietP99Ms = pr.Legit.P50Ms, pr.Legit.P99Ms
	} else {
		pooled = &rep.Flood
		side.flood = append(side.flood, samples...)
		round.FloodP50Ms, round.FloodP99Ms = pr.Legit.P50Ms, pr.Legit.P99Ms
		round.RejectionsPerSecond = pr.LimitedPerSec
		rep.ReachedPerAccountMax = max(rep.ReachedPerAccountMax, pr.ReachedMax)
		rep.AccountsOverLimit += pr.AccountsOverLimit
		rep.ServerErrors += pr.ServerErrors
		rep.TransportErrors += pr.TransportErrs
	}
	pooled.Attempts += pr.Legit.Attempts
	pooled.Succeeded += pr.Legit.Succeeded
	return nil
}

// endRound adds the round's ratios of flood over quiet. A phase without
// a successful sign-in has no percentiles: its round gives no ratio (0 in
// PerRound), rather than a 0 that would read as a flood that sped the
// user up and pull the median down.
func (side *legitSide) endRound() {
	round := &side.round
	if round.QuietP99Ms > 0 && round.QuietP50Ms > 0 && round.FloodP99Ms > 0 && round.FloodP50Ms > 0 {
		round.P99Ratio, round.P50Ratio = round.FloodP99Ms/round.QuietP99Ms, round.FloodP50Ms/round.QuietP50Ms
		side.p99s, side.p50s = append(side.p99s, round.P99Ratio), append(side.p50s, round.P50Ratio)
	}
	side.rejections = append(side.rejections, round.RejectionsPerSecond)
	side.rep.PerRound = append(side.rep.PerRound, *round)
}

// end sets the report's medians and pooled figures.
func (side *legitSide) end() {
	rep := side.rep
	rep.MedianP99Ratio, rep.MedianP50Ratio = median(side.p99s), median(side.p50s)
	rep.MedianRejectionsPerSecond = median(side.rejections)
	rep.Quiet.pool(side.quiet)
	rep.Flood.pool(side.flood)
	if rep.Quiet.P99Ms > 0 {
		rep.PooledP99Ratio = rep.Flood.P99Ms / rep.Quiet.P99Ms
	}
}

// roundsWithoutRatio counts the rounds endRound gave no ratio.
func (rep *legitCompareReport) roundsWithoutRatio() int {
	n := 0
	for _, r := range rep.PerRound {
		if r.P99Ratio == 0 {
			n++
		}
	}
	return n
}

// durations turns a report's milliseconds back into durations.
func durations(msecs []float64) []time.Duration {
	out := make([]time.Duration, len(msecs))
	for i, m := range msecs {
		out[i] = time.Duration(m * float64(time.Millisecond))
	}
	return out
}

// pool sets p's percentiles from the samples of every phase of its kind.
func (p *legitPooled) pool(samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	s := slices.Sorted(slices.Values(samples))
	p.P50Ms, p.P99Ms, p.MaxMs = ms(percentileOf(s, 50)), ms(percentileOf(s, 99)), ms(s[len(s)-1])
}

func (rep *legitCompareReport) print(w io.Writer, c attackConfig) {
	fmt.Fprintf(w, "target        %s%s\n", rep.Target, loginPath)
	fmt.Fprintf(w, "rounds        %d, each a quiet and a flood phase of %s, order shuffled with --seed %d\n", rep.Rounds, c.duration, rep.Seed)
	fmt.Fprintf(w, "returning     %s from %s, each every %s\n", plural(rep.LegitUsers, "browser"), rep.Source, c.legitInterval)
	accounts := "new each round"
	if rep.SameAccounts {
		accounts = "the same every round"
	}
	fmt.Fprintf(w, "flood         %d workers, %s x %s, %s\n", rep.Workers, plural(rep.Accounts, "account"), plural(rep.Passwords, "password"), accounts)
	fmt.Fprintf(w, "load average  %s before, %s after\n\n", rep.LoadBefore, rep.LoadAfter)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\torder\tquiet p50 / p99 ms\tflood p50 / p99 ms\tp99 flood/quiet\trejections/s\t")
	for i, r := range rep.PerRound {
		fmt.Fprintf(tw, "%d\t%s, %s\t%.1f / %.1f\t%.1f / %.1f\t%.2fx\t%s\t\n", i+1, r.Order[0], r.Order[1],
			r.QuietP50Ms, r.QuietP99Ms, r.FloodP50Ms, r.FloodP99Ms, r.P99Ratio, thousands(r.RejectionsPerSecond))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nmedian of the rounds' ratios, flood over quiet: p99 %.2fx, p50 %.2fx\n", rep.MedianP99Ratio, rep.MedianP50Ratio)
	if n := rep.roundsWithoutRatio(); n > 0 {
		fmt.Fprintf(w, "warning       %s without a ratio, left out of the medians: a phase with no successful sign-in\n", plural(n, "round"))
	}
	fmt.Fprintf(w, "pooled        quiet p50 / p99 %.1f / %.1f ms, flood %.1f / %.1f ms: p99 %.2fx\n",
		rep.Quiet.P50Ms, rep.Quiet.P99Ms, rep.Flood.P50Ms, rep.Flood.P99Ms, rep.PooledP99Ratio)
	fmt.Fprintf(w, "signed in     %d of %d quiet, %d of %d under the flood\n", rep.Quiet.Succeeded, rep.Quiet.Attempts, rep.Flood.Succeeded, rep.Flood.Attempts)
	fmt.Fprintf(w, "flooded accounts reached password checking at most %d times each (--account-limit %d); attack 5xx %d, socket errors %d\n",
		rep.ReachedPerAccountMax, c.accountLimit, rep.ServerErrors, rep.TransportErrors)
}
