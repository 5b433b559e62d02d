package ratelimit

import (
	"context"
	"sync"
	"time"
)

// Local enforces rules and lockouts inside one process, with the same
// semantics as the Redis-backed Limiter and Lockouts: a sliding-window log
// per rule and identity, all-or-nothing across the rules of one request,
// lock checks for Lockable rules, escalating locks. It is what a replica
// falls back to while Redis is unreachable: each replica then limits on its
// own, so N replicas admit up to N times a limit, which is still a limit.
//
// Memory is bounded: at most maxIdentities logs are kept. When full, logs
// whose window has passed are dropped; if none has, requests for new
// identities are rejected until some expire, so a flood of fresh
// identities cannot exhaust memory.
type Local struct {
	mu       sync.Mutex
	now      func() time.Time
	max      int
	logs     map[string]*localLog
	failures map[string]*localLockout
	policy   LockoutPolicy
	name     string // the lockouts' rule name
}

type localLog struct {
	times  []time.Time // admission times, oldest first
	window time.Duration
}

type localLockout struct {
	failures int
	level    int
	until    time.Time // zero: not locked
	last     time.Time // last failure or lock end, for Memory
}

// DefaultLocalIdentities bounds a Local's memory: about 100 bytes plus 24
// bytes per admitted request for each identity.
const DefaultLocalIdentities = 100_000

// NewLocal returns an in-process limiter whose lockouts belong to rule name
// with policy p; now is its clock (nil: time.Now).
func NewLocal(name string, p LockoutPolicy, maxIdentities int, now func() time.Time) (*Local, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if p.Memory == 0 {
		p.Memory = p.MaxDuration
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	if maxIdentities <= 0 {
		maxIdentities = DefaultLocalIdentities
	}
	return &Local{now: now, max: maxIdentities, logs: map[string]*localLog{}, failures: map[string]*localLockout{}, policy: p, name: name}, nil
}

// AllowAll checks a request against every rule and records it in all of
// them only if all admit it.
func (l *Local) AllowAll(_ context.Context, rules ...Rule) (Decision, error) {
	if err := validRules(rules); err != nil {
		return Decision{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	d := Decision{Allowed: true, Results: make([]Result, len(rules))}
	logs := make([]*localLog, len(rules))
	for i, r := range rules {
		res := Result{Name: r.Name, Limit: r.Limit}
		key := r.Name + "\x00" + r.ID
		log := l.logs[key]
		if log == nil {
			log = l.newLog(key, r.Limit.Window, now)
		}
		logs[i] = log
		count := 0
		if log != nil {
			log.trim(now)
			count = len(log.times)
		}
		res.Count = count
		switch {
		case r.Lockable && l.lockedFor(r.ID, now) > 0:
			res.Locked, res.RetryAfter = true, l.lockedFor(r.ID, now)
		case log == nil:
			// Full of live identities: a new one waits.
			res.RetryAfter = time.Second
		case count >= r.Limit.Count:
			res.RetryAfter = log.times[count-r.Limit.Count].Add(r.Limit.Window).Sub(now)
		default:
			res.Allowed = true
		}
		res.Remaining = max(r.Limit.Count-count, 0)
		if !res.Allowed {
			d.Allowed = false
			d.RetryAfter = max(d.RetryAfter, res.RetryAfter)
		}
		d.Results[i] = res
	}
	if !d.Allowed {
		return d, nil
	}
	for i := range rules {
		logs[i].times = append(logs[i].times, now)
		d.Results[i].Count++
		d.Results[i].Remaining--
	}
	return d, nil
}

// newLog makes room for and returns a new log, or nil when the bound is
// reached by live logs.
func (l *Local) newLog(key string, window time.Duration, now time.Time) *localLog {
	if len(l.logs) >= l.max {
		for k, log := range l.logs {
			if log.trim(now); len(log.times) == 0 {
				delete(l.logs, k)
			}
		}
		if len(l.logs) >= l.max {
			return nil
		}
	}
	log := &localLog{window: window}
	l.logs[key] = log
	return log
}

func (log *localLog) trim(now time.Time) {
	i := 0
	for i < len(log.times) && !now.Before(log.times[i].Add(log.window)) {
		i++
	}
	log.times = log.times[i:]
}

func (l *Local) lockedFor(id string, now time.Time) time.Duration {
	f := l.failures[id]
	if f == nil || !now.Before(f.until) {
		return 0
	}
	return f.until.Sub(now)
}

// Fail records a failed attempt for id, as Lockouts.Fail does.
func (l *Local) Fail(_ context.Context, id string) (Failure, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	f := l.failures[id]
	if f == nil {
		if len(l.failures) >= l.max {
			l.sweepFailures(now)
		}
		f = &localLockout{}
		l.failures[id] = f
	}
	if left := l.lockedFor(id, now); left > 0 {
		return Failure{Level: f.level, LockedFor: left}, nil
	}
	if !f.last.IsZero() && now.Sub(f.last) > l.policy.Memory {
		f.failures, f.level = 0, 0
	}
	f.last = now
	f.failures++
	if f.failures < l.policy.Threshold {
		return Failure{Failures: f.failures, Level: f.level}, nil
	}
	n := f.failures
	f.level++
	d := l.policy.Duration << min(f.level-1, 40)
	if d > l.policy.MaxDuration || d <= 0 {
		d = l.policy.MaxDuration
	}
	f.until, f.failures, f.last = now.Add(d), 0, now.Add(d)
	return Failure{LockedNow: true, Failures: n, Level: f.level, LockedFor: d}, nil
}

func (l *Local) sweepFailures(now time.Time) {
	for id, f := range l.failures {
		if now.Sub(f.last) > l.policy.Memory && !now.Before(f.until) {
			delete(l.failures, id)
		}
	}
}

// Clear ends id's lock and forgets its failures, keeping the level.
func (l *Local) Clear(_ context.Context, id string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.failures[id]
	if f == nil {
		return false, nil
	}
	was := l.now().Before(f.until)
	f.until, f.failures = time.Time{}, 0
	return was, nil
}
