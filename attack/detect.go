package attack

import (
	"math"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// Counts are sign-in attempts by outcome over some span.
type Counts struct {
	// Attempts counts every attempt, whatever its outcome.
	Attempts int64
	// Failures: a wrong password for an account that exists.
	Failures int64
	// Unknown: an attempt for an account that does not exist.
	Unknown int64
	// Rejected: refused by a limit or a lockout before password checking.
	Rejected  int64
	Held      int64 // the right password, held for new-device verification
	Successes int64
}

// Add counts one attempt of outcome o.
func (c *Counts) Add(o auth.Outcome) {
	c.Attempts++
	switch o {
	case auth.OutcomeFailed:
		c.Failures++
	case auth.OutcomeUnknownAccount:
		c.Unknown++
	case auth.OutcomeRejected:
		c.Rejected++
	case auth.OutcomeHeld:
		c.Held++
	case auth.OutcomeSucceeded:
		c.Successes++
	}
}

// plus returns c + d.
func (c Counts) plus(d Counts) Counts {
	return Counts{c.Attempts + d.Attempts, c.Failures + d.Failures, c.Unknown + d.Unknown,
		c.Rejected + d.Rejected, c.Held + d.Held, c.Successes + d.Successes}
}

// failed is the password checks that failed: wrong passwords and unknown
// accounts.
func (c Counts) failed() int64 { return c.Failures + c.Unknown }

// decided is the attempts whose password was checked.
func (c Counts) decided() int64 { return c.failed() + c.Successes + c.Held }

// Trigger names the signal that tripped attack mode.
type Trigger string

// The signals that trip attack mode.
const (
	// TripFailures: failed password checks reached their threshold and
	// their share of the decided attempts reached requiredShare.
	TripFailures Trigger = "failures"
	// TripUnknownAccounts: attempts for accounts that do not exist reached
	// their threshold.
	TripUnknownAccounts Trigger = "unknown_accounts"
)

// Thresholds are the counts in one window that trip attack mode.
type Thresholds struct {
	Failures, UnknownAccounts int64
}

// Thresholds returns the thresholds given baseline, the mean counts of one
// window in ordinary traffic: each the larger of its floor and Factor
// times the baseline.
func (c Config) Thresholds(baseline Counts) Thresholds {
	raise := func(floor, base int64) int64 {
		return max(floor, int64(math.Ceil(c.Factor*float64(base))))
	}
	return Thresholds{Failures: raise(c.Failures, baseline.failed()), UnknownAccounts: raise(c.UnknownAccounts, baseline.Unknown)}
}

// Trip reports which signal, if any, trips attack mode for the counts of a
// window, given the baseline of one window.
func (c Config) Trip(window, baseline Counts) (Trigger, bool) {
	t := c.Thresholds(baseline)
	if failed := window.failed(); failed >= t.Failures && float64(failed) >= requiredShare(baseline)*float64(window.decided()) {
		return TripFailures, true
	}
	if window.Unknown >= t.UnknownAccounts {
		return TripUnknownAccounts, true
	}
	return "", false
}

// requiredShare is the share of decided attempts that must fail, besides
// their count, for the failures trigger: ShareFactor times the share that
// fails in the baseline, within MinFailureShare and FailureShare. A
// deployment without enough of a baseline (a new one, or a very quiet
// one) needs FailureShare, so that its honest failures at a busy moment
// never trip attack mode. A busy one, whose honest sign-ins mostly
// succeed, needs less, so that those successes cannot hide a stuffing
// run that fails at a rate the count threshold sees. Being a ratio, the
// baseline's share is right from its first minutes, when its counts are
// still a fraction of the deployment's.
func requiredShare(baseline Counts) float64 {
	decided := baseline.decided()
	if decided < minShareBaseline {
		return FailureShare
	}
	return min(FailureShare, max(MinFailureShare, ShareFactor*float64(baseline.failed())/float64(decided)))
}

// Detector counts one stream of attempts in process, second by second for
// the window and minute by minute for the baseline, and says whether they
// trip attack mode. It does no I/O and keeps a fixed amount of memory; time
// is whatever the caller says, so a simulated day runs in a moment. It is
// not safe for concurrent use.
type Detector struct {
	cfg     Config
	seconds []second
	minutes []minute
	// baseline is the cached baseline of one window, for baselineAt.
	baseline   Counts
	baselineAt int64
}

type second struct {
	unix int64
	c    Counts
}

type minute struct {
	unix int64 // unix minute
	c    Counts
}

// baselineMinutes is the number of whole minutes in the baseline.
const baselineMinutes = int64(BaselineSpan / time.Minute)

// NewDetector returns a Detector for cfg, which must be valid.
func NewDetector(cfg Config) *Detector {
	return &Detector{
		cfg:        cfg,
		seconds:    make([]second, int(cfg.Window/time.Second)),
		minutes:    make([]minute, baselineMinutes+1),
		baselineAt: -1,
	}
}

// Add counts one attempt of outcome o at at. ordinary says whether it
// counts towards the baseline: attempts made while attack mode is on do
// not, so a long attack cannot raise the thresholds that keep it on.
func (d *Detector) Add(at time.Time, o auth.Outcome, ordinary bool) {
	sec := at.Unix()
	s := &d.seconds[mod(sec, len(d.seconds))]
	if s.unix != sec {
		*s = second{unix: sec}
	}
	s.c.Add(o)
	if !ordinary {
		return
	}
	m := &d.minutes[mod(sec/60, len(d.minutes))]
	if m.unix != sec/60 {
		*m = minute{unix: sec / 60}
	}
	m.c.Add(o)
}

// Window returns the counts of the window ending at now.
func (d *Detector) Window(now time.Time) Counts {
	var c Counts
	first := now.Unix() - int64(len(d.seconds)) + 1
	for _, s := range d.seconds {
		if s.unix >= first && s.unix <= now.Unix() {
			c = c.plus(s.c)
		}
	}
	return c
}

// Baseline returns the mean counts of one window over the BaselineSpan of
// whole minutes before now's.
func (d *Detector) Baseline(now time.Time) Counts {
	cur := now.Unix() / 60
	if d.baselineAt == cur {
		return d.baseline
	}
	var sum Counts
	for _, m := range d.minutes {
		if m.unix >= cur-baselineMinutes && m.unix < cur {
			sum = sum.plus(m.c)
		}
	}
	d.baseline, d.baselineAt = perWindow(sum, baselineMinutes, d.cfg.Window), cur
	return d.baseline
}

// Trip reports whether the window ending at now trips attack mode.
func (d *Detector) Trip(now time.Time) (Trigger, bool) {
	return d.cfg.Trip(d.Window(now), d.Baseline(now))
}

// perWindow scales the sum of minutes minutes to the mean of one window,
// rounding up so that a little ordinary traffic counts.
func perWindow(sum Counts, minutes int64, window time.Duration) Counts {
	scale := func(n int64) int64 {
		return int64(math.Ceil(float64(n) * float64(window) / float64(time.Duration(minutes)*time.Minute)))
	}
	return Counts{scale(sum.Attempts), scale(sum.Failures), scale(sum.Unknown), scale(sum.Rejected), scale(sum.Held), scale(sum.Successes)}
}

func mod(n int64, m int) int {
	r := int(n % int64(m))
	if r < 0 {
		r += m
	}
	return r
}
