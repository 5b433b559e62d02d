package ratelimit

import (
	"context"
	"crypto/rand"
	_ "embed"
	"fmt"
	"slices"
	"time"
)

// Attempts in flight.
//
// A lockout counts a failure once it is known: after the password was
// checked. A lock checked in the decision, before the check, lets every
// guess sent at once while an identity is short of its lock be checked
// (and only then counted). An attempt begun (BeginAttempt) holds a place
// towards the lock until it ends (EndAttempt, once its failure, if any,
// is counted): the failures counted and the attempts in flight never pass
// the threshold together, so no number of guesses sent at once is checked
// past the lock.

//go:embed inflight.lua
var inflightLua string

var inflightScript = newScript(inflightLua)

// inflightSuffix ends the key of an identity's attempts in flight.
const inflightSuffix = ":inflight"

// Begun is the verdict on an attempt begun against a lockout.
type Begun struct {
	// Allowed reports that the attempt may go ahead; it holds a place
	// until EndAttempt with Token, or its ttl has passed, unless it is one
	// the identity already failed with, which holds none.
	Allowed bool
	// Token names the attempt's place for EndAttempt; "" when refused or
	// when it holds none (ending "" changes nothing).
	Token string
	// Locked reports that the attempt was refused because the identity is
	// locked; else a refusal is for the attempts in flight.
	Locked bool
	// RetryAfter is, when refused, the lock's time left, or the time until
	// the oldest attempt in flight stops counting if none ends first.
	RetryAfter time.Duration
}

// checkTTL reports whether ttl is a time an attempt can count for.
func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond || ttl > MaxWindow {
		return fmt.Errorf("ratelimit: attempt ttl %s out of range %s..%s", ttl, time.Millisecond, MaxWindow)
	}
	return nil
}

// newAttemptToken returns a token no other attempt, in any process, has:
// 130 random bits. Random rather than counted, since a token may be
// handed to whoever began the attempt (the decision API's attempt ids
// carry one), and a count would tell them how many attempts the process
// has begun.
func newAttemptToken() string { return rand.Text() }

// BeginAttempt begins an attempt against id's lockout (see Store).
func (l *Lockouts) BeginAttempt(ctx context.Context, id, attempt string, ttl time.Duration) (Begun, error) {
	if err := checkTTL(ttl); err != nil {
		return Begun{}, err
	}
	token := newAttemptToken()
	vals, err := inflightScript.run(ctx, l.rdb,
		[]string{lockKey(l.keys, id), l.keys.Key(id, ":failures"), l.keys.Key(id, inflightSuffix), l.keys.Key(id, ":attempts")},
		l.policy.Threshold, token, ceilMillis(ttl), attemptDigest(attempt),
	).Int64Slice()
	if err != nil {
		return Begun{}, fmt.Errorf("ratelimit: beginning attempt: %w", err)
	}
	if len(vals) != 3 {
		return Begun{}, fmt.Errorf("ratelimit: beginning attempt: unexpected reply %v", vals)
	}
	switch vals[0] {
	case 1:
		return Begun{Allowed: true, Token: token}, nil
	case 2:
		return Begun{Allowed: true}, nil
	}
	return Begun{Locked: vals[2] == 1, RetryAfter: time.Duration(max(vals[1], 1)) * time.Millisecond}, nil
}

// EndAttempt ends the attempt token against id's lockout (see Store).
func (l *Lockouts) EndAttempt(ctx context.Context, id, token string) error {
	if token == "" {
		return nil
	}
	if err := l.rdb.ZRem(ctx, l.keys.Key(id, inflightSuffix), token).Err(); err != nil {
		return fmt.Errorf("ratelimit: ending attempt: %w", err)
	}
	return nil
}

// BeginAttempt begins an attempt against id's lockout under rule name.
func (s *RedisStore) BeginAttempt(ctx context.Context, name, id, attempt string, ttl time.Duration) (Begun, error) {
	l := s.lockouts[name]
	if l == nil {
		return Begun{}, noLockouts(name)
	}
	return l.BeginAttempt(ctx, id, attempt, ttl)
}

// EndAttempt ends the attempt token against id's lockout under rule name.
func (s *RedisStore) EndAttempt(ctx context.Context, name, id, token string) error {
	l := s.lockouts[name]
	if l == nil {
		return noLockouts(name)
	}
	return l.EndAttempt(ctx, id, token)
}

// localAttempt is an attempt in flight in a Local: its token and when it
// stops counting.
type localAttempt struct {
	token string
	until time.Time
}

// BeginAttempt begins an attempt against id's lockout under rule name, as
// Lockouts.BeginAttempt does.
func (l *Local) BeginAttempt(_ context.Context, name, id, attempt string, ttl time.Duration) (Begun, error) {
	p, sh, key, group, err := l.lockoutEntry(name, id)
	if err != nil {
		return Begun{}, err
	}
	defer sh.mu.Unlock()
	if err := checkTTL(ttl); err != nil {
		return Begun{}, err
	}
	now := l.now()
	if left := lockedFor(sh, group, key, now); left > 0 {
		return Begun{Locked: true, RetryAfter: left}, nil
	}
	f, wait, ok := l.placeFor(sh, group, key, p, attemptDigest(attempt), now)
	switch {
	case !ok:
		return Begun{RetryAfter: wait}, nil
	case f == nil:
		return Begun{Allowed: true}, nil
	}
	return Begun{Allowed: true, Token: takePlace(f, now, ttl)}, nil
}

// placeFor decides whether an attempt with digest, against the lockout of
// key in the lock table's group, which is not locked, may go ahead at
// now: ok, with the lockout to take its place in (takePlace), or nil when
// it takes none (an attempt the identity already failed with); else the
// wait until the soonest attempt in flight stops counting. sh holds the
// lockout and is locked. Nothing is taken: a request's decision takes its
// places only once every rule and every place admits it.
func (l *Local) placeFor(sh *localShard, group, key string, p LockoutPolicy, digest string, now time.Time) (f *localLockout, wait time.Duration, ok bool) {
	f, _ = sh.lockouts.get(group, key)
	if f == nil {
		f = &localLockout{}
		sh.lockouts.add(group, key, f)
	}
	f.flying = slices.DeleteFunc(f.flying, func(a localAttempt) bool { return !now.Before(a.until) })
	failures, attempts := f.failures, f.attempts
	if !f.last.IsZero() && now.Sub(f.last) > p.Memory {
		// Forgotten, as Redis lets the failures and attempts expire.
		failures, attempts = 0, nil
	}
	if digest != "" && slices.Contains(attempts, digest) {
		return nil, 0, true
	}
	if n := len(f.flying); n > 0 && failures+n >= p.Threshold {
		// Begun in order, with one ttl or another: the soonest to stop
		// counting is the earliest until.
		soonest := slices.MinFunc(f.flying, func(a, b localAttempt) int { return a.until.Compare(b.until) })
		return nil, max(soonest.until.Sub(now), time.Nanosecond), false
	}
	return f, 0, true
}

// takePlace takes a place in f's attempts in flight for ttl from now and
// returns its token.
func takePlace(f *localLockout, now time.Time, ttl time.Duration) string {
	token := newAttemptToken()
	f.flying = append(f.flying, localAttempt{token: token, until: now.Add(ttl)})
	return token
}

// EndAttempt ends the attempt token against id's lockout under rule name.
func (l *Local) EndAttempt(_ context.Context, name, id, token string) error {
	_, sh, key, group, err := l.lockoutEntry(name, id)
	if err != nil {
		return err
	}
	defer sh.mu.Unlock()
	if f, _ := sh.lockouts.get(group, key); f != nil {
		f.flying = slices.DeleteFunc(f.flying, func(a localAttempt) bool { return a.token == token })
	}
	return nil
}
