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
	Rejected int64
	// Held: the right password, held alike with the wrong ones (new-device
	// verification, a breached password), and counted as they are.
	Held      int64
	Successes int64
	// Steps: the right password of an account with a second factor,
	// answered with its second step.
	Steps int64
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
	case auth.OutcomeStep:
		c.Steps++
	}
}

// plus returns c + d.
func (c Counts) plus(d Counts) Counts {
	return Counts{c.Attempts + d.Attempts, c.Failures + d.Failures, c.Unknown + d.Unknown,
		c.Rejected + d.Rejected, c.Held + d.Held, c.Successes + d.Successes, c.Steps + d.Steps}
}

// minus returns c - d.
func (c Counts) minus(d Counts) Counts {
	return Counts{c.Attempts - d.Attempts, c.Failures - d.Failures, c.Unknown - d.Unknown,
		c.Rejected - d.Rejected, c.Held - d.Held, c.Successes - d.Successes, c.Steps - d.Steps}
}

// failed is the password checks that failed: wrong passwords and unknown
// accounts, and the right passwords held alike with them (a held answer
// is a wrong one's to whoever sent it, and counts as one).
func (c Counts) failed() int64 { return c.Failures + c.Unknown + c.Held }

// decided is the attempts whose password was checked.
func (c Counts) decided() int64 { return c.failed() + c.Successes + c.Steps }

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
	// TripLongFailures and TripLongUnknownAccounts: the same signals over
	// Config.LongWindow.
	TripLongFailures        Trigger = "long_failures"
	TripLongUnknownAccounts Trigger = "long_unknown_accounts"
)

// Thresholds are the counts in one window that trip attack mode.
type Thresholds struct {
	Failures, UnknownAccounts int64
}

// Thresholds returns the thresholds of Window given baseline, the mean
// counts of one Window in ordinary traffic: each the larger of its floor
// and Factor times the baseline, the latter capped at MaxFactor times the
// floor.
func (c Config) Thresholds(baseline Counts) Thresholds {
	return c.raise(Thresholds{c.Failures, c.UnknownAccounts}, baseline)
}

// LongThresholds returns the thresholds of LongWindow given baseline, the
// mean counts of one LongWindow in ordinary traffic, as Thresholds does
// with the long window's floors.
func (c Config) LongThresholds(baseline Counts) Thresholds {
	return c.raise(Thresholds{c.LongFailures, c.LongUnknownAccounts}, baseline)
}

func (c Config) raise(floors Thresholds, baseline Counts) Thresholds {
	raise := func(floor, base int64) int64 {
		// MaxFactor is at least 1, so the cap is never under the floor.
		ceiling := int64(math.Min(c.MaxFactor*float64(floor), math.MaxInt64/2))
		return max(floor, min(ceiling, int64(math.Ceil(c.Factor*float64(base)))))
	}
	return Thresholds{Failures: raise(floors.Failures, baseline.failed()), UnknownAccounts: raise(floors.UnknownAccounts, baseline.Unknown)}
}

// Trip reports which signal, if any, trips attack mode for the counts of a
// Window, given the baseline of one Window.
func (c Config) Trip(window, baseline Counts) (Trigger, bool) {
	return trip(c.Thresholds(baseline), window, baseline, TripFailures, TripUnknownAccounts, false)
}

// TripLong reports which signal, if any, trips attack mode for the counts
// of a LongWindow, given the baseline of one LongWindow. It never trips
// when LongWindow is 0. Both its signals need the failure share besides
// their counts: over minutes, a big deployment's honest unknown accounts
// add up past a floor that a stuffing run's pace reaches, before its
// baseline has grown, and only their share tells them apart.
func (c Config) TripLong(long, baseline Counts) (Trigger, bool) {
	if c.LongWindow == 0 {
		return "", false
	}
	return trip(c.LongThresholds(baseline), long, baseline, TripLongFailures, TripLongUnknownAccounts, true)
}

// trip checks window against t; unknownShare has the unknown-accounts
// signal also need the failure share.
func trip(t Thresholds, window, baseline Counts, failures, unknown Trigger, unknownShare bool) (Trigger, bool) {
	return tripShare(t, requiredShare(baseline), window, failures, unknown, unknownShare)
}

// tripShare is trip with the baseline's requiredShare given.
func tripShare(t Thresholds, required float64, window Counts, failures, unknown Trigger, unknownShare bool) (Trigger, bool) {
	failed := window.failed()
	share := float64(failed) >= required*float64(window.decided())
	if failed >= t.Failures && share {
		return failures, true
	}
	if window.Unknown >= t.UnknownAccounts && (share || !unknownShare) {
		return unknown, true
	}
	return "", false
}

// Signals are the counts of both windows and their baselines, what
// TripAny looks at.
type Signals struct {
	Window, Baseline         Counts
	LongWindow, LongBaseline Counts
}

// TripAny reports which signal of s, if any, trips attack mode: the short
// window's first.
func (c Config) TripAny(s Signals) (Trigger, bool) {
	if trig, ok := c.Trip(s.Window, s.Baseline); ok {
		return trig, true
	}
	return c.TripLong(s.LongWindow, s.LongBaseline)
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

// tripper is TripAny for the baseline of one BaselineSpan's counts, its
// thresholds and failure shares worked out once: they change only with
// the baseline, once a minute at most, and the attack detector would
// otherwise work them out again for every attempt of a flood.
type tripper struct {
	// sum is the counts of the BaselineSpan the rest is of; set is false
	// until there is one.
	sum                   Counts
	set                   bool
	short, long           Thresholds
	shortShare, longShare float64
}

// tripperFor returns c's tripper for the BaselineSpan's counts sum, t
// itself when it is of sum already.
func (c Config) tripperFor(t tripper, sum Counts) tripper {
	if t.set && t.sum == sum {
		return t
	}
	sig := c.signals(Counts{}, Counts{}, sum)
	return tripper{sum: sum, set: true,
		short: c.Thresholds(sig.Baseline), long: c.LongThresholds(sig.LongBaseline),
		shortShare: requiredShare(sig.Baseline), longShare: requiredShare(sig.LongBaseline)}
}

// trip is c.TripAny(c.signals(window, long, t.sum)).
func (c Config) trip(t tripper, window, long Counts) (Trigger, bool) {
	if trig, ok := tripShare(t.short, t.shortShare, window, TripFailures, TripUnknownAccounts, false); ok {
		return trig, true
	}
	if c.LongWindow == 0 {
		return "", false
	}
	return tripShare(t.long, t.longShare, long, TripLongFailures, TripLongUnknownAccounts, true)
}

// signals returns the Signals of window and long given sum, the counts of
// the BaselineSpan, scaled to each window.
func (c Config) signals(window, long, sum Counts) Signals {
	return Signals{
		Window: window, Baseline: perWindow(sum, baselineMinutes, c.Window),
		LongWindow: long, LongBaseline: perWindow(sum, baselineMinutes, c.LongWindow),
	}
}

// Detector counts one stream of attempts in process, second by second for
// the window and minute by minute for the baseline, and says whether they
// trip attack mode. It does no I/O and keeps a fixed amount of memory; time
// is whatever the caller says, so a simulated day runs in a moment. It is
// not safe for concurrent use.
type Detector struct {
	cfg     Config
	seconds []second
	// newest is the latest second added and window the counts of the
	// seconds of the window ending at it, kept as attempts come so that
	// Window at the newest second sums nothing.
	newest int64
	window Counts
	// recent counts every attempt by minute, for the long window.
	recent []minute
	// minutes counts ordinary attempts by minute, for the baseline.
	minutes []minute
	// cachedAt is the minute the figures below are of: they change only
	// from one minute to the next.
	cachedAt int64
	// baselineSum is the sum of the baseline's minutes, baseline and
	// longBaseline its mean per window and per long window.
	baselineSum, baseline, longBaseline Counts
	// longBefore is the sum of the long window's minutes before
	// cachedAt's.
	longBefore Counts
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
		cfg:      cfg,
		seconds:  make([]second, int(cfg.Window/time.Second)),
		recent:   make([]minute, max(1, int(cfg.LongWindow/time.Minute))),
		minutes:  make([]minute, baselineMinutes+1),
		cachedAt: -1,
	}
}

// Add counts one attempt of outcome o at at. ordinary says whether it
// counts towards the baseline: attempts made while attack mode is on do
// not, so a long attack cannot raise the thresholds that keep it on.
func (d *Detector) Add(at time.Time, o auth.Outcome, ordinary bool) {
	sec := at.Unix()
	d.advance(sec)
	// An attempt later than the window, whose slot holds a newer second,
	// counts only in the minutes.
	if s := &d.seconds[mod(sec, len(d.seconds))]; s.unix <= sec {
		if s.unix != sec {
			*s = second{unix: sec}
		}
		s.c.Add(o)
		if sec > d.newest-int64(len(d.seconds)) {
			d.window.Add(o)
		}
	}
	addMinute(d.recent, sec/60, o)
	if m := sec / 60; m < d.cachedAt && m > d.cachedAt-int64(len(d.recent)) {
		// Late, from a minute the long window's cache holds.
		d.longBefore.Add(o)
	}
	if ordinary {
		addMinute(d.minutes, sec/60, o)
	}
}

// addMinute counts o in minute min of ring, unless its slot holds a newer
// minute.
func addMinute(ring []minute, min int64, o auth.Outcome) {
	m := &ring[mod(min, len(ring))]
	if m.unix > min {
		return
	}
	if m.unix != min {
		*m = minute{unix: min}
	}
	m.c.Add(o)
}

// advance moves the running window's end to sec when sec is newer,
// taking out the seconds that leave it. Each slot a second leaves holds
// that second or an older one outside the window; the work is bounded by
// the window's length and, over many attempts, one slot per second.
func (d *Detector) advance(sec int64) {
	if sec <= d.newest {
		return
	}
	n := int64(len(d.seconds))
	if sec-d.newest >= n {
		d.newest, d.window = sec, Counts{}
		return
	}
	for t := d.newest + 1; t <= sec; t++ {
		if s := d.seconds[mod(t, len(d.seconds))]; s.unix == t-n {
			d.window = d.window.minus(s.c)
		}
	}
	d.newest = sec
}

// Window returns the counts of the window ending at now: the running
// total when now is in the newest second added, else a sum of the
// window's seconds.
func (d *Detector) Window(now time.Time) Counts {
	if now.Unix() == d.newest {
		return d.window
	}
	var c Counts
	first := now.Unix() - int64(len(d.seconds)) + 1
	for _, s := range d.seconds {
		if s.unix >= first && s.unix <= now.Unix() {
			c = c.plus(s.c)
		}
	}
	return c
}

// LongWindow returns the counts of the long window ending at now: now's
// minute and the LongWindow/time.Minute - 1 before it; none when
// Config.LongWindow is 0.
func (d *Detector) LongWindow(now time.Time) Counts {
	if d.cfg.LongWindow == 0 {
		return Counts{}
	}
	d.cache(now)
	c := d.longBefore
	if m := d.recent[mod(d.cachedAt, len(d.recent))]; m.unix == d.cachedAt {
		c = c.plus(m.c)
	}
	return c
}

// cache computes, once a minute, what changes only from one minute to the
// next.
func (d *Detector) cache(now time.Time) {
	cur := now.Unix() / 60
	if d.cachedAt == cur {
		return
	}
	var sum, before Counts
	for _, m := range d.minutes {
		if m.unix >= cur-baselineMinutes && m.unix < cur {
			sum = sum.plus(m.c)
		}
	}
	for _, m := range d.recent {
		if m.unix > cur-int64(len(d.recent)) && m.unix < cur {
			before = before.plus(m.c)
		}
	}
	d.cachedAt, d.baselineSum, d.longBefore = cur, sum, before
	d.baseline = perWindow(sum, baselineMinutes, d.cfg.Window)
	d.longBaseline = perWindow(sum, baselineMinutes, d.cfg.LongWindow)
}

// baselineSumAt returns the sum of the BaselineSpan of whole minutes
// before now's.
func (d *Detector) baselineSumAt(now time.Time) Counts {
	d.cache(now)
	return d.baselineSum
}

// Baseline returns the mean counts of one window over the BaselineSpan of
// whole minutes before now's.
func (d *Detector) Baseline(now time.Time) Counts {
	d.cache(now)
	return d.baseline
}

// LongBaseline returns the mean counts of one long window over the same
// span as Baseline.
func (d *Detector) LongBaseline(now time.Time) Counts {
	d.cache(now)
	return d.longBaseline
}

// Signals returns the counts of both windows ending at now and their
// baselines.
func (d *Detector) Signals(now time.Time) Signals {
	return Signals{Window: d.Window(now), Baseline: d.Baseline(now), LongWindow: d.LongWindow(now), LongBaseline: d.LongBaseline(now)}
}

// Trip reports whether the window or the long window ending at now trips
// attack mode.
func (d *Detector) Trip(now time.Time) (Trigger, bool) {
	return d.cfg.TripAny(d.Signals(now))
}

// perWindow scales the sum of minutes minutes to the mean of one window,
// rounding up so that a little ordinary traffic counts.
func perWindow(sum Counts, minutes int64, window time.Duration) Counts {
	scale := func(n int64) int64 {
		return int64(math.Ceil(float64(n) * float64(window) / float64(time.Duration(minutes)*time.Minute)))
	}
	return Counts{scale(sum.Attempts), scale(sum.Failures), scale(sum.Unknown), scale(sum.Rejected), scale(sum.Held), scale(sum.Successes),
		scale(sum.Steps)}
}

func mod(n int64, m int) int {
	r := int(n % int64(m))
	if r < 0 {
		r += m
	}
	return r
}
