package authtest

import (
	"context"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/ratelimit"
)

// Limiter is an auth.Limiter on a store that is never lost, such as a
// ratelimit.Local: it is never degraded, its checks always pass, and it
// has no lockouts to restore. What a Redis outage does to the limits is
// tested with the Redis-backed ratelimit.Failover.
type Limiter struct{ ratelimit.Store }

var _ auth.Limiter = Limiter{}

// NewLimiter returns the in-process limits cfg asks for: a ratelimit.Local
// with the lockouts of every lockable rule.
func NewLimiter(cfg auth.Config) (Limiter, error) {
	local, err := cfg.LocalStore(0)
	if err != nil {
		return Limiter{}, err
	}
	return Limiter{local}, nil
}

// Degraded reports false: the store is never lost.
func (Limiter) Degraded() bool { return false }

// Check reports that the store answers: it always does.
func (Limiter) Check(context.Context) error { return nil }

// Policy is ratelimit.FailLocal, which is what the store is.
func (Limiter) Policy() ratelimit.FailurePolicy { return ratelimit.FailLocal }

// Watch ignores the hooks: nothing is ever lost or failing.
func (Limiter) Watch(func(context.Context) ([]ratelimit.HeldLock, error), func(error)) {}

// Close does nothing: the store does no background work.
func (Limiter) Close() {}
