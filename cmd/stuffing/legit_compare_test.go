package main

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/ratelimit"
)

// legitCompareServer starts an XCloak with the returning user
// legit@example.org, its accounts' limit and lockout at testAccountLimit.
func legitCompareServer(t *testing.T) string {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.Limits[auth.RuleLoginAccount] = ratelimit.Limit{Count: testAccountLimit, Window: 10 * time.Minute}
		c.Limits[auth.RuleLoginDevice] = ratelimit.Limit{Count: 100, Window: 10 * time.Minute}
		c.Lockout.Threshold = testAccountLimit
	}})
	url := env.Start(t)
	env.AddUser(t, "legit@example.org", "legit-password-1", false)
	return url
}

// runLegitCompare runs a short legit-compare against a server of its own
// and returns its report. Its phases last 2 s: each must see both
// browsers sign in, the second from an eighth of a second in, and the
// flood reach every account's limit, which a loaded machine's pause of a
// second at a phase's start would keep from happening in a phase of 1 s.
func runLegitCompare(t *testing.T, rounds, accounts int, extra ...string) legitCompareReport {
	t.Helper()
	args := append([]string{"legit-compare", "--json", "--target", legitCompareServer(t), "--seed", "7",
		"--rounds", fmt.Sprint(rounds), "--duration", "2s", "--settle", "0s",
		"--accounts", fmt.Sprint(accounts), "--passwords", "20", "--sources", "5", "--workers", "8", "--max-requests", "3000",
		"--account-limit", fmt.Sprint(testAccountLimit), "--lockout-threshold", fmt.Sprint(testAccountLimit),
		"--legit-email", "legit@example.org", "--legit-password", "legit-password-1",
		"--legit-users", "2", "--legit-interval", "250ms"}, extra...)
	stdout, stderr, err := runStuffing(t, args...)
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, stderr)
	}
	var rep legitCompareReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, stdout)
	}
	return rep
}

// Against a real XCloak: every round runs both phases, each flood attacks
// accounts new to the server (so each reaches its limit again, exactly),
// and the returning user's browsers keep their cookies across the phases.
func TestLegitCompareAgainstXCloak(t *testing.T) {
	const rounds, accounts = 2, 2
	rep := runLegitCompare(t, rounds, accounts)
	if rep.Seed != 7 || len(rep.PerRound) != rounds || len(rep.Phases) != 2*rounds {
		t.Fatalf("seed %d, %d rounds, %d phases; want 7, %d, %d", rep.Seed, len(rep.PerRound), len(rep.Phases), rounds, 2*rounds)
	}
	for r, round := range rep.PerRound {
		if !slices.Equal(slices.Sorted(slices.Values(round.Order)), []string{phaseFlood, phaseQuiet}) {
			t.Errorf("round %d: order %v, want quiet and flood once each", r+1, round.Order)
		}
		if round.QuietP99Ms <= 0 || round.FloodP99Ms <= 0 || round.P99Ratio != round.FloodP99Ms/round.QuietP99Ms {
			t.Errorf("round %d: %+v, want both p99s and their ratio", r+1, round)
		}
	}
	for i, p := range rep.Phases {
		if want := rep.PerRound[p.Round-1].Order[i%2]; p.Round != i/2+1 || p.Phase != want {
			t.Errorf("phase %d is round %d's %s, want round %d's %s", i, p.Round, p.Phase, i/2+1, want)
		}
		r := p.Report
		if r.Legit == nil || r.Legit.Attempts < 2 || r.Legit.Succeeded != r.Legit.Attempts {
			t.Errorf("round %d %s: legit %+v, want every sign-in of both browsers to succeed", p.Round, p.Phase, r.Legit)
		}
		switch p.Phase {
		case phaseQuiet:
			if r.Sent != 0 {
				t.Errorf("round %d quiet: the attack sent %d", p.Round, r.Sent)
			}
		case phaseFlood:
			// Fresh accounts: each reaches its limit in its own phase.
			if r.Reached != accounts*testAccountLimit || r.ReachedMax != testAccountLimit || r.Limited == 0 {
				t.Errorf("round %d flood: %d reached (at most %d an account), %d rejected; want %d, %d and rejections",
					p.Round, r.Reached, r.ReachedMax, r.Limited, accounts*testAccountLimit, testAccountLimit)
			}
		}
	}
	if rep.AccountsOverLimit != 0 || rep.ReachedPerAccountMax != testAccountLimit || rep.ServerErrors != 0 || rep.TransportErrors != 0 {
		t.Errorf("over limit %d, reached at most %d, 5xx %d, socket errors %d", rep.AccountsOverLimit, rep.ReachedPerAccountMax, rep.ServerErrors, rep.TransportErrors)
	}
	if rep.Quiet.Succeeded != rep.Quiet.Attempts || rep.Flood.Succeeded != rep.Flood.Attempts || rep.Quiet.P99Ms <= 0 || rep.Flood.P99Ms <= 0 {
		t.Errorf("pooled quiet %+v, flood %+v", rep.Quiet, rep.Flood)
	}
	if rep.MedianP99Ratio <= 0 || rep.PooledP99Ratio != rep.Flood.P99Ms/rep.Quiet.P99Ms {
		t.Errorf("median p99 ratio %g, pooled %g", rep.MedianP99Ratio, rep.PooledP99Ratio)
	}
}

// With --same-accounts the second round's flood finds its accounts
// limited by the first's: rejections alone.
func TestLegitCompareSameAccounts(t *testing.T) {
	const accounts = 2
	rep := runLegitCompare(t, 2, accounts, "--same-accounts")
	if !rep.SameAccounts || len(rep.Phases) != 4 {
		t.Fatalf("same_accounts %v, %d phases", rep.SameAccounts, len(rep.Phases))
	}
	var reached []int64
	for _, p := range rep.Phases {
		if p.Phase == phaseFlood {
			reached = append(reached, p.Report.Reached)
		}
	}
	if !slices.Equal(reached, []int64{accounts * testAccountLimit, 0}) {
		t.Errorf("the floods reached password checking %v times, want %d then 0", reached, accounts*testAccountLimit)
	}
}

func TestLegitCompareFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--target", "http://127.0.0.1:1"}, "--legit-email and --legit-password are required"},
		{[]string{"--target", "http://127.0.0.1:1", "--legit-email", "a@example.org", "--legit-password", "x", "--max-requests", "0"}, "--max-requests 0"},
		{[]string{"--target", "http://127.0.0.1:1", "--legit-email", "a@example.org", "--legit-password", "x", "--rounds", "0"}, "--rounds 0 out of range"},
		{[]string{"--target", "http://127.0.0.1:1", "--legit-email", "a@example.org", "--legit-password", "x", "--settle", "2m"}, "--settle 2m0s out of range"},
		{[]string{"--target", "http://127.0.0.1:1", "--legit-email", "a@example.org", "--legit-password", "x", "--legit-users", "0"}, "--legit-users 0 out of range"},
		{[]string{"--target", "http://127.0.0.1:1", "--legit-email", "a@example.org", "--legit-password", "x", "--before", "http://127.0.0.1:1"}, "--before http://127.0.0.1:1 is --target"},
	} {
		_, stderr, err := runStuffing(t, append([]string{"legit-compare"}, tt.args...)...)
		if err == nil || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: got %v, stderr %q; want %q", tt.args, err, stderr, tt.want)
		}
	}
}

// With --before a second server's phases run in the same rounds: each
// round's four phases once each, each server's floods on accounts new to
// it, and the target's p99s over the before's.
func TestLegitCompareBefore(t *testing.T) {
	const rounds, accounts = 2, 2
	rep := runLegitCompare(t, rounds, accounts, "--before", legitCompareServer(t))
	b := rep.Before
	if b == nil || b.Target == rep.Target || len(rep.Orders) != rounds {
		t.Fatalf("before %+v, %d orders; want a second server's report and %d orders", b, len(rep.Orders), rounds)
	}
	for r, order := range rep.Orders {
		want := []string{"before/flood", "before/quiet", phaseFlood, phaseQuiet}
		if !slices.Equal(slices.Sorted(slices.Values(order)), want) {
			t.Errorf("round %d: order %v, want each of %v once", r+1, order, want)
		}
	}
	for _, side := range []*legitCompareReport{&rep, b} {
		if len(side.PerRound) != rounds || len(side.Phases) != 2*rounds {
			t.Fatalf("%s: %d rounds, %d phases; want %d, %d", side.Target, len(side.PerRound), len(side.Phases), rounds, 2*rounds)
		}
		for _, p := range side.Phases {
			r := p.Report
			if r.Legit == nil || r.Legit.Attempts < 2 || r.Legit.Succeeded != r.Legit.Attempts {
				t.Errorf("%s round %d %s: legit %+v, want every sign-in to succeed", side.Target, p.Round, p.Phase, r.Legit)
			}
			if p.Phase == phaseFlood && (r.Reached != accounts*testAccountLimit || r.ReachedMax != testAccountLimit) {
				t.Errorf("%s round %d flood: %d reached (at most %d an account), want %d and %d: accounts new to the server",
					side.Target, p.Round, r.Reached, r.ReachedMax, accounts*testAccountLimit, testAccountLimit)
			}
		}
		if side.MedianP99Ratio <= 0 || side.Quiet.P99Ms <= 0 || side.Flood.P99Ms <= 0 {
			t.Errorf("%s: median p99 ratio %g, pooled %+v / %+v", side.Target, side.MedianP99Ratio, side.Quiet, side.Flood)
		}
	}
	if rep.MedianQuietP99OverBefore <= 0 || rep.MedianFloodP99OverBefore <= 0 {
		t.Errorf("over before: quiet %g, flood %g; want both", rep.MedianQuietP99OverBefore, rep.MedianFloodP99OverBefore)
	}
	if rep.AccountsOverLimit != 0 || b.AccountsOverLimit != 0 || b.ServerErrors != 0 || b.TransportErrors != 0 {
		t.Errorf("over limit %d and %d, before's 5xx %d, socket errors %d", rep.AccountsOverLimit, b.AccountsOverLimit, b.ServerErrors, b.TransportErrors)
	}
}

// Without --json, --before prints the before's report after the target's,
// then the target's p99s over the before's.
func TestLegitCompareBeforeText(t *testing.T) {
	target, before := legitCompareServer(t), legitCompareServer(t)
	stdout, stderr, err := runStuffing(t, "legit-compare", "--target", target, "--before", before, "--seed", "7",
		"--rounds", "1", "--duration", "1s", "--settle", "0s", "--accounts", "1", "--passwords", "20", "--sources", "5",
		"--workers", "4", "--max-requests", "500", "--account-limit", fmt.Sprint(testAccountLimit),
		"--lockout-threshold", fmt.Sprint(testAccountLimit), "--legit-email", "legit@example.org",
		"--legit-password", "legit-password-1", "--legit-users", "1", "--legit-interval", "250ms")
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, stderr)
	}
	at, bt, ratio := strings.Index(stdout, "target        "+target), strings.Index(stdout, "\nbefore:\n"), strings.Index(stdout, "over "+before+": quiet p99 ")
	if at < 0 || bt < at || !strings.Contains(stdout[bt:], "target        "+before) || ratio < bt {
		t.Errorf("want the target's report, then \"before:\" and the before's, then the ratios; got\n%s", stdout)
	}
}

// A round whose flood phase had no successful sign-in has no p99 of it:
// its ratio is left out of the median, not counted as 0, which would
// read as a flood that made the user faster.
func TestLegitCompareRoundWithoutSignInsHasNoRatio(t *testing.T) {
	side := &legitSide{rep: &legitCompareReport{}}
	for _, r := range []legitRound{
		{QuietP50Ms: 30, QuietP99Ms: 50, FloodP50Ms: 33, FloodP99Ms: 60},
		{QuietP50Ms: 30, QuietP99Ms: 50}, // every flood sign-in failed
		{QuietP50Ms: 30, QuietP99Ms: 50, FloodP50Ms: 36, FloodP99Ms: 70},
	} {
		r.Order = []string{phaseQuiet, phaseFlood}
		side.round = r
		side.endRound()
	}
	side.end()
	if got := side.rep.MedianP99Ratio; math.Abs(got-1.3) > 1e-9 {
		t.Errorf("median p99 ratio %g, want 1.3: the median of 1.2 and 1.4, the round without flood sign-ins left out", got)
	}
	if got := side.rep.MedianP50Ratio; math.Abs(got-1.15) > 1e-9 {
		t.Errorf("median p50 ratio %g, want 1.15", got)
	}
	var out strings.Builder
	side.rep.print(&out, attackConfig{})
	if !strings.Contains(out.String(), "1 round without a ratio") {
		t.Errorf("the text report does not say a round had no ratio:\n%s", out.String())
	}
}
