package attack_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xcloak/xcloak/attack"
	"github.com/xcloak/xcloak/auth"
)

// traffic draws Poisson arrivals at rate(t) per second and an outcome for
// each.
type traffic struct {
	rng     *rand.Rand
	rate    func(t time.Duration) float64
	outcome func(rng *rand.Rand) auth.Outcome
	next    time.Duration
}

// arrival returns the time of the next attempt and its outcome. Arrivals
// are drawn by thinning against maxRate, so a rate that changes over the
// day stays a Poisson process.
func (tr *traffic) arrival(maxRate float64) (time.Duration, auth.Outcome) {
	for {
		tr.next += time.Duration(tr.rng.ExpFloat64() / maxRate * float64(time.Second))
		if tr.rng.Float64()*maxRate <= tr.rate(tr.next) {
			return tr.next, tr.outcome(tr.rng)
		}
	}
}

// ordinary is honest traffic: 5% wrong passwords, 1% unknown accounts.
func ordinary(rng *rand.Rand) auth.Outcome {
	switch p := rng.Float64(); {
	case p < 0.01:
		return auth.OutcomeUnknownAccount
	case p < 0.06:
		return auth.OutcomeFailed
	}
	return auth.OutcomeSucceeded
}

// stuffing is the attack of issue 12: 98% fail, a third of them for
// accounts that do not exist.
func stuffing(rng *rand.Rand) auth.Outcome {
	switch p := rng.Float64(); {
	case p < 1.0/3:
		return auth.OutcomeUnknownAccount
	case p < 0.98:
		return auth.OutcomeFailed
	}
	return auth.OutcomeSucceeded
}

// diurnal swings from 5 sign-ins a second at 04:00 to 40 at 16:00, 22.5 on
// average.
func diurnal(t time.Duration) float64 {
	return 22.5 - 17.5*math.Cos(2*math.Pi*(t-4*time.Hour).Hours()/24)
}

// day0 is the midnight the simulations start at.
var day0 = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// TestBusyDayNeverTrips feeds two full days of busy ordinary traffic
// through the detector with the default settings, checking both windows
// after every attempt as the watch does; attack mode must never be
// entered. The first day starts with no baseline, as a fresh deployment
// does.
func TestBusyDayNeverTrips(t *testing.T) {
	cfg := attack.DefaultConfig()
	d := attack.NewDetector(cfg)
	tr := &traffic{rng: rand.New(rand.NewPCG(12, 1)), rate: diurnal, outcome: ordinary}
	var n int
	var peak, longPeak attack.Counts
	for {
		at, o := tr.arrival(40)
		if at > 48*time.Hour {
			break
		}
		now := day0.Add(at)
		d.Add(now, o, true)
		n++
		if trig, ok := d.Trip(now); ok {
			t.Fatalf("ordinary traffic tripped attack mode (%s) at %s after %d attempts: window %+v, baseline %+v",
				trig, at, n, d.Window(now), d.Baseline(now))
		}
		if w := d.Window(now); w.Failures+w.Unknown > peak.Failures+peak.Unknown {
			peak = w
		}
		if w := d.LongWindow(now); w.Failures+w.Unknown > longPeak.Failures+longPeak.Unknown {
			longPeak = w
		}
	}
	t.Logf("%d attempts in 48 h (%.1f/s); the busiest window had %d wrong passwords and %d unknown accounts of %d attempts",
		n, float64(n)/(48*3600), peak.Failures, peak.Unknown, peak.Attempts)
	t.Logf("the busiest long window had %d wrong passwords and %d unknown accounts of %d attempts",
		longPeak.Failures, longPeak.Unknown, longPeak.Attempts)
}

// TestStuffingTripsWithinFewAttempts runs the attack of issue 12 (70
// attempts a second, 98% failing, a third for unknown accounts) on top of
// ordinary traffic, and counts the attack's attempts before attack mode is
// on.
func TestStuffingTripsWithinFewAttempts(t *testing.T) {
	const bound = 70 // attack attempts
	for _, tc := range []struct {
		name       string
		background float64 // ordinary sign-ins a second
		start      time.Duration
	}{
		{"quiet night", 5, 28 * time.Hour},
		{"average", 22.5, 34 * time.Hour},
		{"peak", 40, 40 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := attack.NewDetector(attack.DefaultConfig())
			rng := rand.New(rand.NewPCG(12, 2))
			honest := &traffic{rng: rng, rate: func(time.Duration) float64 { return tc.background }, outcome: ordinary}
			// Three hours of ordinary traffic make the baseline.
			for {
				at, o := honest.arrival(tc.background)
				if at > tc.start {
					break
				}
				now := day0.Add(at)
				d.Add(now, o, true)
				if _, ok := d.Trip(now); ok {
					t.Fatalf("tripped by ordinary traffic at %s", at)
				}
			}
			bad := &traffic{rng: rng, rate: func(time.Duration) float64 { return 70 }, outcome: stuffing, next: tc.start}
			next := honest.next
			attempts := 0
			for attempts < 10*bound {
				at, o := bad.arrival(70)
				for next < at { // the honest attempts before this one
					_, ho := honest.arrival(tc.background)
					d.Add(day0.Add(next), ho, true)
					next = honest.next
				}
				attempts++
				d.Add(day0.Add(at), o, true)
				if trig, ok := d.Trip(day0.Add(at)); ok {
					t.Logf("attack mode on after %d attack attempts, %.2fs into the attack (%s)", attempts, (at - tc.start).Seconds(), trig)
					if attempts > bound {
						t.Errorf("took %d attack attempts, want at most %d", attempts, bound)
					}
					return
				}
			}
			t.Fatalf("not tripped after %d attack attempts", attempts)
		})
	}
}

// BenchmarkDetector is the in-process cost of one attempt on the sign-in
// path: counting it and checking the window.
func BenchmarkDetector(b *testing.B) {
	d := attack.NewDetector(attack.DefaultConfig())
	rng := rand.New(rand.NewPCG(12, 3))
	now := day0
	for i := 0; b.Loop(); i++ {
		if i%50 == 0 {
			now = now.Add(time.Second)
		}
		d.Add(now, ordinary(rng), true)
		d.Trip(now)
	}
}

// TestFreshDeploymentAtPeakNeverTrips: a deployment started at the busiest
// hour has no baseline, so its failures threshold is the floor, which
// honest failures at 40 sign-ins a second come near; the failure share
// keeps them from tripping attack mode until the baseline raises the
// threshold.
func TestFreshDeploymentAtPeakNeverTrips(t *testing.T) {
	d := attack.NewDetector(attack.DefaultConfig())
	start := day0.Add(16 * time.Hour) // diurnal's peak
	tr := &traffic{rng: rand.New(rand.NewPCG(5, 9)), rate: func(at time.Duration) float64 { return diurnal(16*time.Hour + at) }, outcome: ordinary}
	for {
		at, o := tr.arrival(40)
		if at > 3*time.Hour {
			break
		}
		now := start.Add(at)
		d.Add(now, o, true)
		if trig, ok := d.Trip(now); ok {
			t.Fatalf("a fresh deployment's peak tripped attack mode (%s) after %s: window %+v, baseline %+v",
				trig, at, d.Window(now), d.Baseline(now))
		}
	}
}

// TestHonestSuccessesDoNotHideStuffing: on a busy site with a baseline, a
// stuffing run against accounts that exist (no unknown ones to trip that
// signal), paced so that honest successes keep its failures under half
// of the checks, still trips attack mode: the baseline has raised the
// failures threshold, and the share no longer applies.
func TestHonestSuccessesDoNotHideStuffing(t *testing.T) {
	for _, tc := range []struct{ honest, rate float64 }{{22.5, 15}, {40, 25}, {22.5, 5}} {
		t.Run(fmt.Sprintf("%.1f honest/s, %.0f stuffing/s", tc.honest, tc.rate), func(t *testing.T) {
			d := attack.NewDetector(attack.DefaultConfig())
			start := day0.Add(3 * time.Hour)
			honest := honestAt(d, day0, tc.honest)
			honest(start) // three hours of baseline
			if _, ok := d.Trip(start); ok {
				t.Fatal("honest traffic tripped")
			}
			step := time.Duration(float64(time.Second) / tc.rate)
			for i := range int(tc.rate * 3600) {
				now := start.Add(time.Duration(i) * step)
				honest(now)
				d.Add(now, auth.OutcomeFailed, true)
				if _, ok := d.Trip(now); ok {
					t.Logf("tripped after %d stuffing attempts (%s)", i+1, time.Duration(i)*step)
					return
				}
			}
			t.Fatal("an hour of stuffing hidden by honest successes never tripped attack mode")
		})
	}
}

// honestAt feeds Poisson ordinary traffic at rate a second into d, from
// start up to each instant it is asked for.
func honestAt(d *attack.Detector, start time.Time, rate float64) func(until time.Time) {
	rng := rand.New(rand.NewPCG(7, 7))
	next := start
	return func(until time.Time) {
		for next.Before(until) {
			next = next.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
			d.Add(next, ordinary(rng), true)
		}
	}
}

// TestPacedListTripsOnLongWindow: the stuffing list of issue 12 (1,520
// attempts, a third for unknown accounts) sent at 2.5 a second, under the
// short window's floors, on a site with a trickle of honest sign-ins,
// trips attack mode through the long window before the list is spent.
// Without the long window it never does.
func TestPacedListTripsOnLongWindow(t *testing.T) {
	const list, rate = 1520, 2.5
	run := func(cfg attack.Config) (int, attack.Trigger, bool) {
		d := attack.NewDetector(cfg)
		start := day0.Add(3 * time.Hour)
		honest := honestAt(d, day0, 0.2)
		honest(start) // three hours of baseline
		rng := rand.New(rand.NewPCG(12, 5))
		step := time.Duration(float64(time.Second) / rate)
		for i := range list {
			now := start.Add(time.Duration(i) * step)
			honest(now)
			d.Add(now, stuffing(rng), true)
			if trig, ok := d.Trip(now); ok {
				return i + 1, trig, true
			}
		}
		return list, "", false
	}
	short := attack.DefaultConfig()
	short.LongWindow = 0
	if n, trig, ok := run(short); ok {
		t.Fatalf("the short window alone tripped (%s) after %d attempts; the paced list is not under its floors", trig, n)
	}
	n, trig, ok := run(attack.DefaultConfig())
	if !ok {
		t.Fatalf("the paced list of %d attempts at %.1f/s never tripped attack mode", list, rate)
	}
	if trig != attack.TripLongFailures && trig != attack.TripLongUnknownAccounts {
		t.Errorf("tripped by %s, want a long-window signal", trig)
	}
	t.Logf("attack mode on after %d of %d attempts (%.0fs into the run), by %s", n, list, float64(n)/rate, trig)
}

// TestRatchetStopsAtCeiling: an attacker who raises the failures of
// existing accounts 3.5 times every 2 hours, a step under Factor, keeps
// every baseline-raised threshold just above the next step. Without a
// ceiling that never trips; with MaxFactor it trips in the first step
// whose pace passes the ceiling of a window.
func TestRatchetStopsAtCeiling(t *testing.T) {
	const (
		first = 0.25 // failures a second in the first step
		grow  = 3.5
		step  = 2 * time.Hour
	)
	run := func(cfg attack.Config, steps int) (int, attack.Trigger, bool) {
		d := attack.NewDetector(cfg)
		honest := honestAt(d, day0, 5)
		rate := first
		for k := range steps {
			start := day0.Add(time.Duration(k) * step)
			every := time.Duration(float64(time.Second) / rate)
			for now := start; now.Before(start.Add(step)); now = now.Add(every) {
				honest(now)
				d.Add(now, auth.OutcomeFailed, true)
				if trig, ok := d.Trip(now); ok {
					return k, trig, true
				}
			}
			rate *= grow
		}
		return steps, "", false
	}
	uncapped := attack.DefaultConfig()
	uncapped.MaxFactor = 1_000_000
	if k, trig, ok := run(uncapped, 6); ok {
		t.Fatalf("without a ceiling the ratchet tripped (%s) in step %d; it is not a ratchet", trig, k)
	}
	cfg := attack.DefaultConfig()
	// The first step whose pace alone reaches a window's ceiling.
	want, rate := 0, first
	for rate*cfg.LongWindow.Seconds() < cfg.MaxFactor*float64(cfg.LongFailures) &&
		rate*cfg.Window.Seconds() < cfg.MaxFactor*float64(cfg.Failures) {
		want++
		rate *= grow
	}
	k, trig, ok := run(cfg, want+1)
	if !ok {
		t.Fatalf("the ratchet never tripped through step %d (%.1f failures/s), past the ceiling", want, rate)
	}
	if k > want {
		t.Errorf("tripped in step %d, want at most %d", k, want)
	}
	t.Logf("tripped (%s) in step %d of the ratchet (%.2f failures/s); the first past the ceiling is %d (%.2f/s)",
		trig, k, first*math.Pow(grow, float64(k)), want, rate)
}

// TestLongWindowCounts: the long window holds the current minute and the
// nine before it, attempts that arrive late for a past minute included,
// and nothing older.
func TestLongWindowCounts(t *testing.T) {
	d := attack.NewDetector(attack.DefaultConfig())
	start := day0.Add(time.Hour)
	for i := range 12 { // one failure a minute for 12 minutes
		d.Add(start.Add(time.Duration(i)*time.Minute), auth.OutcomeFailed, true)
	}
	now := start.Add(11*time.Minute + 30*time.Second)
	if got := d.LongWindow(now).Failures; got != 10 {
		t.Fatalf("%d failures in the long window, want 10 (minutes 2 to 11)", got)
	}
	d.Add(start.Add(5*time.Minute+59*time.Second), auth.OutcomeUnknownAccount, true) // late
	d.Add(start.Add(time.Minute), auth.OutcomeUnknownAccount, true)                  // late and out of the window
	if got := d.LongWindow(now); got.Failures != 10 || got.Unknown != 1 {
		t.Errorf("after two late attempts: %+v, want 10 failures and 1 unknown account", got)
	}
	if got := d.LongWindow(now.Add(time.Minute)); got.Failures != 9 || got.Unknown != 1 {
		t.Errorf("a minute on: %+v, want 9 failures and 1 unknown account", got)
	}
}

// TestWindowCountsExactly adds attempts whose times mostly move forward,
// skip a few seconds, jump ahead by more than a window, and come late by
// up to two windows, and checks after each that the window ending at the newest second counts
// exactly the attempts made in its seconds. A running total that forgot to
// drop a second leaving the window, dropped one twice, or counted a late
// attempt from before the window fails it.
func TestWindowCountsExactly(t *testing.T) {
	cfg := attack.DefaultConfig()
	width := int64(cfg.Window / time.Second)
	outcomes := []auth.Outcome{auth.OutcomeFailed, auth.OutcomeUnknownAccount, auth.OutcomeRejected, auth.OutcomeHeld, auth.OutcomeSucceeded}
	d := attack.NewDetector(cfg)
	rng := rand.New(rand.NewPCG(17, 4))
	bySecond := map[int64]attack.Counts{}
	base := day0.Unix()
	sec, newest := base, base
	for i := range 20_000 {
		switch p := rng.Float64(); {
		case p < 0.002:
			sec = newest + width + rng.Int64N(3*width) // a quiet spell longer than the window
		case p < 0.05:
			sec = newest - rng.Int64N(2*width) // late
		case p < 0.08:
			sec = newest + 2 + rng.Int64N(width-2) // a gap within the window
		case p < 0.4:
			sec = newest + 1
		default:
			sec = newest
		}
		o := outcomes[rng.IntN(len(outcomes))]
		d.Add(time.Unix(sec, int64(rng.IntN(1e9))), o, true)
		c := bySecond[sec]
		c.Add(o)
		bySecond[sec] = c
		newest = max(newest, sec)
		var want attack.Counts
		for s := newest - width + 1; s <= newest; s++ {
			c := bySecond[s]
			want = attack.Counts{Attempts: want.Attempts + c.Attempts, Failures: want.Failures + c.Failures, Unknown: want.Unknown + c.Unknown,
				Rejected: want.Rejected + c.Rejected, Held: want.Held + c.Held, Successes: want.Successes + c.Successes}
		}
		if got := d.Window(time.Unix(newest, 999_999_999)); got != want {
			t.Fatalf("attempt %d at second %d (newest %d): window %+v, want %+v", i, sec-base, newest-base, got, want)
		}
	}
}

// TestTripAtItsThresholds: without a baseline, a window trips attack mode
// at exactly DefaultConfig's count of failures, half of its decided
// attempts failed, and not one attempt short of either.
func TestTripAtItsThresholds(t *testing.T) {
	cfg := attack.DefaultConfig()
	for _, c := range []struct {
		name   string
		window attack.Counts
		want   bool
	}{
		{"the count, half failed", attack.Counts{Failures: cfg.Failures, Successes: cfg.Failures}, true},
		{"a failure short of the count", attack.Counts{Failures: cfg.Failures - 1}, false},
		{"the count, a success past half", attack.Counts{Failures: cfg.Failures, Successes: cfg.Failures + 1}, false},
	} {
		if trig, ok := cfg.Trip(c.window, attack.Counts{}); ok != c.want || ok && trig != attack.TripFailures {
			t.Errorf("%s: Trip(%+v) = %q, %t; want %t", c.name, c.window, trig, ok, c.want)
		}
	}
}

// TestHeldCountsAsAFailure: a right password held alike with the wrong
// ones (new-device verification, a breached password) counts as they do,
// so that whether attack mode trips, or its quiet period starts again,
// tells nobody which was right; a second step asked for, which the answer
// shows already, counts as neither.
func TestHeldCountsAsAFailure(t *testing.T) {
	cfg := attack.DefaultConfig()
	count := func(outcomes ...auth.Outcome) attack.Counts {
		var c attack.Counts
		for _, o := range outcomes {
			c.Add(o)
		}
		return c
	}
	failures := make([]auth.Outcome, cfg.Failures-1)
	for i := range failures {
		failures[i] = auth.OutcomeFailed
	}
	for _, last := range []auth.Outcome{auth.OutcomeFailed, auth.OutcomeHeld} {
		window := count(append(failures, last)...)
		if trig, ok := cfg.Trip(window, attack.Counts{}); !ok || trig != attack.TripFailures {
			t.Errorf("%d failures and outcome %d: Trip = %q, %t; want the failures' trip, as for a failure", cfg.Failures-1, last, trig, ok)
		}
	}
	window := count(append(failures, auth.OutcomeStep)...)
	if trig, ok := cfg.Trip(window, attack.Counts{}); ok {
		t.Errorf("%d failures and a second step asked for: Trip = %q; want none", cfg.Failures-1, trig)
	}
}
