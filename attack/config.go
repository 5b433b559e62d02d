package attack

import (
	"errors"
	"fmt"
	"time"
)

// Config is when attack mode is entered and left.
type Config struct {
	// Window is the sliding window the signals are counted over, in whole
	// seconds from 1s to MaxWindow.
	Window time.Duration
	// Failures is the floor of failed password checks (wrong passwords and
	// unknown accounts) in Window that trips attack mode, provided they
	// are a share of the attempts decided that ordinary traffic does not
	// reach (FailureShare without a baseline; see requiredShare).
	Failures int64
	// UnknownAccounts is the floor of attempts for accounts that do not
	// exist in Window that trips attack mode.
	UnknownAccounts int64
	// Factor raises each floor to Factor times the signal's baseline, its
	// mean per Window over the last BaselineSpan outside attack mode.
	Factor float64
	// Quiet is how long attack mode lasts after the last trip.
	Quiet time.Duration

	// LongWindow is a second, longer window, in whole minutes from 1m to
	// MaxLongWindow, that catches a run paced under the floors of Window;
	// 0 turns it off. It is counted minute by minute: it holds the
	// current minute and the LongWindow/time.Minute - 1 before it.
	LongWindow time.Duration
	// LongFailures and LongUnknownAccounts are the floors of the same two
	// signals in LongWindow, raised by Factor times their baseline per
	// LongWindow, with the same failure-share rule.
	LongFailures, LongUnknownAccounts int64
	// MaxFactor caps every baseline-raised threshold at MaxFactor times
	// its floor, so that an attacker who raises failures slowly, a step
	// under Factor at a time, cannot lift the thresholds without bound.
	// A deployment whose ordinary traffic needs thresholds above the cap
	// raises the floors.
	MaxFactor float64
}

// Bounds and fixed parts of the detection.
const (
	// MaxWindow bounds Config.Window.
	MaxWindow = 5 * time.Minute
	// FailureShare is the share of decided attempts that must fail for the
	// failures trigger without a baseline: a busy hour of honest users
	// with many failures still mostly succeeds. With one, the share asked
	// for is ShareFactor times the baseline's, at least MinFailureShare
	// (see requiredShare).
	FailureShare    = 0.5
	MinFailureShare = 0.2
	ShareFactor     = 3.0
	// minShareBaseline is how many decided attempts a window's baseline
	// must have for its failure share to be trusted.
	minShareBaseline = 10
	// BaselineSpan is how far back the baseline reaches.
	BaselineSpan = 2 * time.Hour
	// MaxLongWindow bounds Config.LongWindow.
	MaxLongWindow = 30 * time.Minute
)

// Lookback is how far before attack mode starts the browsers new to their
// accounts are signed out (auth.Service.SignOutNewDevices): three windows,
// the time a stuffing run at the floors' pace needs to trip the detector.
func (c Config) Lookback() time.Duration { return 3 * c.Window }

// lookback is Lookback for an attack that signal tripped: the long window
// for one of its signals, since the run went on that long under the
// short window's floors.
func (c Config) lookback(signal Trigger) time.Duration {
	if signal == TripLongFailures || signal == TripLongUnknownAccounts {
		return max(c.Lookback(), c.LongWindow)
	}
	return c.Lookback()
}

// DefaultConfig returns the defaults (see docs/SECURITY-MODEL.md, "Attack
// mode", for why these).
func DefaultConfig() Config {
	return Config{
		Window:          10 * time.Second,
		Failures:        30,
		UnknownAccounts: 20,
		Factor:          4,
		Quiet:           15 * time.Minute,

		LongWindow:          10 * time.Minute,
		LongFailures:        600,
		LongUnknownAccounts: 400,
		MaxFactor:           20,
	}
}

// Validate reports what is wrong with c, if anything.
func (c Config) Validate() error {
	switch {
	case c.Window < time.Second || c.Window > MaxWindow || c.Window%time.Second != 0:
		return fmt.Errorf("attack: window %s is not whole seconds from 1s to %s", c.Window, MaxWindow)
	case c.Failures < 1 || c.UnknownAccounts < 1:
		return errors.New("attack: the failures and unknown-accounts floors must be at least 1")
	case !(c.Factor >= 1 && c.Factor <= 1000):
		return fmt.Errorf("attack: factor %v is not from 1 to 1000", c.Factor)
	case c.Quiet < time.Second || c.Quiet > 24*time.Hour:
		return fmt.Errorf("attack: quiet period %s is not from 1s to 24h", c.Quiet)
	case c.LongWindow < 0 || c.LongWindow > MaxLongWindow || c.LongWindow%time.Minute != 0:
		return fmt.Errorf("attack: long window %s is not whole minutes up to %s", c.LongWindow, MaxLongWindow)
	case c.LongWindow > 0 && c.LongWindow <= c.Window:
		return fmt.Errorf("attack: long window %s is not longer than the window %s", c.LongWindow, c.Window)
	case c.LongWindow > 0 && (c.LongFailures < 1 || c.LongUnknownAccounts < 1):
		return errors.New("attack: the long window's failures and unknown-accounts floors must be at least 1")
	case !(c.MaxFactor >= 1 && c.MaxFactor <= 1_000_000):
		return fmt.Errorf("attack: max factor %v is not from 1 to 1000000", c.MaxFactor)
	}
	return nil
}
