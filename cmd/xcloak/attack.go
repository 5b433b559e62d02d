package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/xcloak/xcloak/attack"
)

// attackSettings are the settings of attack mode's detection (package
// attack), after the service's own in --help and README.
func attackSettings(d attack.Config) []setting {
	count := func(env, flag, usage string, def int64, field func(*attack.Config) *int64) setting {
		return setting{
			env: env, flag: flag, def: strconv.FormatInt(def, 10), usage: usage, scope: forServe,
			set: func(c *config, v string) error {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 1 || n > 1_000_000 {
					return fmt.Errorf("%q is not a whole number from 1 to 1000000", v)
				}
				*field(&c.Attack) = n
				return nil
			},
		}
	}
	duration := func(env, flag, usage string, def, most time.Duration, field func(*attack.Config) *time.Duration) setting {
		return setting{
			env: env, flag: flag, def: formatDuration(def), usage: usage + ", as a `duration`", scope: forServe,
			set: func(c *config, v string) error {
				dur, err := parsePositiveDuration(v)
				if err != nil {
					return err
				}
				if dur < time.Second || dur > most || dur%time.Second != 0 {
					return fmt.Errorf("%s is not whole seconds from 1s to %s", v, formatDuration(most))
				}
				*field(&c.Attack) = dur
				return nil
			},
		}
	}
	return []setting{
		duration("XCLOAK_ATTACK_WINDOW", "attack-window", "sliding window (1s to 5m) over which sign-in failures are counted to detect an attack",
			d.Window, attack.MaxWindow, func(a *attack.Config) *time.Duration { return &a.Window }),
		count("XCLOAK_ATTACK_FAILURES", "attack-failures", "failed password checks (`n`) in the attack window, a share of those decided that ordinary traffic does not reach, that switch attack mode on",
			d.Failures, func(a *attack.Config) *int64 { return &a.Failures }),
		count("XCLOAK_ATTACK_UNKNOWN_ACCOUNTS", "attack-unknown-accounts", "sign-ins for accounts that do not exist (`n`) in the attack window that switch attack mode on",
			d.UnknownAccounts, func(a *attack.Config) *int64 { return &a.UnknownAccounts }),
		{
			env: "XCLOAK_ATTACK_FACTOR", flag: "attack-factor", def: strconv.FormatFloat(d.Factor, 'f', -1, 64), scope: forServe,
			usage: "each attack threshold is at least this `factor` (1 to 1000) times its signal's mean per window over the last 2 hours outside attack mode",
			set: func(c *config, v string) error {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || !(f >= 1 && f <= 1000) {
					return fmt.Errorf("%q is not a number from 1 to 1000", v)
				}
				c.Attack.Factor = f
				return nil
			},
		},
		duration("XCLOAK_ATTACK_QUIET", "attack-quiet", "how long attack mode stays on after the last time a threshold was reached (1s to 24h)",
			d.Quiet, 24*time.Hour, func(a *attack.Config) *time.Duration { return &a.Quiet }),
		{
			env: "XCLOAK_ATTACK_LONG_WINDOW", flag: "attack-long-window", def: formatDuration(d.LongWindow), scope: forServe,
			usage: "second, long window (whole minutes up to 30m, longer than the attack window; 0 turns it off) that catches a stuffing run paced under the attack window's thresholds, as a `duration`",
			set: func(c *config, v string) error {
				dur, err := time.ParseDuration(v)
				if err != nil || dur < 0 || dur > attack.MaxLongWindow || dur%time.Minute != 0 {
					return fmt.Errorf("%q is not whole minutes from 0 to %s", v, formatDuration(attack.MaxLongWindow))
				}
				c.Attack.LongWindow = dur
				return nil
			},
		},
		count("XCLOAK_ATTACK_LONG_FAILURES", "attack-long-failures", "failed password checks (`n`) in the long window, a share of those decided that ordinary traffic does not reach, that switch attack mode on",
			d.LongFailures, func(a *attack.Config) *int64 { return &a.LongFailures }),
		count("XCLOAK_ATTACK_LONG_UNKNOWN_ACCOUNTS", "attack-long-unknown-accounts", "sign-ins for accounts that do not exist (`n`) in the long window, with the same share of failures, that switch attack mode on",
			d.LongUnknownAccounts, func(a *attack.Config) *int64 { return &a.LongUnknownAccounts }),
		{
			env: "XCLOAK_ATTACK_MAX_FACTOR", flag: "attack-max-factor", def: strconv.FormatFloat(d.MaxFactor, 'f', -1, 64), scope: forServe,
			usage: "the baseline raises each attack threshold to at most this `factor` (1 to 1000000) times its floor, so that failures raised slowly cannot lift it without bound",
			set: func(c *config, v string) error {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || !(f >= 1 && f <= 1_000_000) {
					return fmt.Errorf("%q is not a number from 1 to 1000000", v)
				}
				c.Attack.MaxFactor = f
				return nil
			},
		},
	}
}
