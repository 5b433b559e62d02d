package auth

import (
	"context"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// Limiter decides the flows' requests by the rule table and keeps the
// lockouts of its lockable rules: any ratelimit.Store, and what the
// service reports and supplies of a store that can lose the Redis behind
// it. A ratelimit.Failover is one (internal/app builds it from Redis);
// package authtest makes one of an in-process ratelimit.Local, which
// never loses anything.
type Limiter interface {
	ratelimit.Store
	// Degraded reports whether the shared limits are unreachable and the
	// failure policy decides.
	Degraded() bool
	// Check pings the shared limits once and, when they cannot be
	// reached, puts the limits in degraded mode at once.
	Check(ctx context.Context) error
	// Policy is what the limits do while degraded.
	Policy() ratelimit.FailurePolicy
	// Watch hands the limits, before first use, the lockouts in force
	// recorded in the lockout log (to honour while the shared ones are
	// lost) and a callback for each failed call to Redis (a metric).
	Watch(restore func(context.Context) ([]ratelimit.HeldLock, error), onRedisError func(error))
	// Close stops the limits' background work.
	Close()
}

var _ Limiter = (*ratelimit.Failover)(nil)

// LockoutPolicies are the lockouts a Limiter keeps for cfg: one for each
// lockable rule of the table, by one policy, so that a known device's
// failures hold that browser and never the account's other browsers;
// RuleLoginPassword's lock is the spraying verdict, by its own,
// RuleAPIKeyIP's is its limit (apiKeyPolicy) and RuleMFAAccount's the
// second step's (mfaPolicy). Each sets an application's identities apart
// in the in-process store (appLockGroup).
func (cfg Config) LockoutPolicies() map[string]ratelimit.LockoutPolicy {
	out := map[string]ratelimit.LockoutPolicy{}
	for _, r := range rules {
		if r.Lockable {
			out[r.Name] = cfg.Lockout
		}
	}
	out[RuleLoginPassword] = sprayPolicy(cfg.SprayAccounts, cfg.SprayWindow)
	out[RuleAPIKeyIP] = apiKeyPolicy(cfg.Limits.Of(RuleAPIKeyIP))
	out[RuleMFAAccount] = mfaPolicy(cfg.Limits.Of(RuleMFAAccount))
	for name, p := range out {
		p.Group = appLockGroup
		out[name] = p
	}
	return out
}

// LocalStore returns the in-process store of cfg's limits (maxIdentities
// as ratelimit.NewLocal takes it): the lockouts of LockoutPolicies, and an
// application's identities set apart (appLockGroup) in the logs of every
// rule, not only of the lockable ones: an application's reset requests
// name accounts at will too.
func (cfg Config) LocalStore(maxIdentities int) (*ratelimit.Local, error) {
	local, err := ratelimit.NewLocal(cfg.LockoutPolicies(), maxIdentities, nil)
	if err != nil {
		return nil, err
	}
	local.SetGroup(appLockGroup)
	return local, nil
}

// mfaMaxLock caps the second step's locks.
const mfaMaxLock = 24 * time.Hour

// mfaPolicy turns RuleMFAAccount's limit into its lock: lim.Count
// codes tried lock for lim.Window, doubling on each repeat up to a day,
// and failures are remembered as long, so that the codes an attacker who
// holds the password can try fall off to a few dozen a day.
func mfaPolicy(lim ratelimit.Limit) ratelimit.LockoutPolicy {
	if lim.Count < 1 || lim.Window <= 0 {
		// An invalid limit, which Limits.Validate refuses.
		return ratelimit.LockoutPolicy{Threshold: 1, Duration: time.Millisecond, MaxDuration: time.Millisecond}
	}
	return ratelimit.LockoutPolicy{Threshold: lim.Count, Duration: lim.Window, MaxDuration: max(lim.Window, mfaMaxLock), Memory: max(lim.Window, mfaMaxLock)}
}

// apiKeyPolicy turns RuleAPIKeyIP's limit into the lock that enforces it
// on failures only: lim.Count failed checks, each within lim.Window of the
// last, lock the network for lim.Window, never longer.
func apiKeyPolicy(lim ratelimit.Limit) ratelimit.LockoutPolicy {
	if lim.Count < 1 || lim.Window <= 0 {
		// An invalid limit, which Limits.Validate refuses.
		return ratelimit.LockoutPolicy{Threshold: 1, Duration: time.Millisecond, MaxDuration: time.Millisecond}
	}
	return ratelimit.LockoutPolicy{Threshold: lim.Count, Duration: lim.Window, MaxDuration: lim.Window, Memory: lim.Window}
}
