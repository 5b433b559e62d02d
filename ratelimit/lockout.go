package ratelimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lockout.lua
var lockoutLua string

var lockoutScript = newScript(lockoutLua)

//go:embed hold.lua
var holdLua string

var holdScript = newScript(holdLua)

//go:embed clear.lua
var clearLua string

var clearScript = newScript(clearLua)

// LockoutPolicy says when and for how long an identity is locked out.
type LockoutPolicy struct {
	// Threshold is the number of consecutive failures that locks.
	Threshold int
	// Duration is the first lock's length; each repeat doubles it.
	Duration time.Duration
	// MaxDuration caps the doubling.
	MaxDuration time.Duration
	// Memory is how long failures are remembered without a new one, and
	// how long after a lock ends (runs out, or is ended by an unlock) the
	// next lock still escalates. Zero means MaxDuration; any other is at
	// least a millisecond.
	Memory time.Duration
	// Group, when set, names the class of an identity whose locks the
	// in-process store (Local) keeps apart from the rule's other
	// classes, as it keeps each rule's apart from the others': a flood
	// of one class's locks pushes out its own. "" is the rule's own
	// class. Where one party chooses identities that another's share a
	// rule with (an application's accounts beside XCloak's own), each
	// party's locks are then bounded apart. Redis ignores it: it keeps
	// every lock.
	Group func(id string) string
}

// LockFor returns how long the lock at level lasts: Duration for the
// first, doubled at each repeat, never more than MaxDuration. Levels below
// 1 count as 1. Every store escalates by it, the Lua script included (it
// receives the durations as arguments, in Redis' milliseconds rounded
// up), so they cannot disagree.
func (p LockoutPolicy) LockFor(level int) time.Duration {
	shift := max(level, 1) - 1
	if shift > 62 {
		return p.MaxDuration
	}
	d := p.Duration << shift
	if d <= 0 || d>>shift != p.Duration || d > p.MaxDuration {
		return p.MaxDuration
	}
	return d
}

// ladder returns the lock durations in milliseconds for levels 1, 2, ...
// up to the first that reaches MaxDuration, which serves every higher
// level: the arguments lockout.lua takes.
func (p LockoutPolicy) ladder() []int64 {
	var ms []int64
	for level := 1; ; level++ {
		d := p.LockFor(level)
		ms = append(ms, ceilMillis(d))
		if d >= p.MaxDuration {
			return ms
		}
	}
}

// ceilMillis is d in whole milliseconds, as Redis counts a key's life,
// rounded up: a lock or a memory cut to the millisecond below would end
// before the policy's, and before the in-process store's.
func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// withDefaults returns p with its defaults filled in (a zero Memory is
// MaxDuration), validated: what every store enforces.
func (p LockoutPolicy) withDefaults() (LockoutPolicy, error) {
	if p.Memory == 0 {
		p.Memory = p.MaxDuration
	}
	return p, p.Validate()
}

// Validate reports whether p can be enforced.
func (p LockoutPolicy) Validate() error {
	switch {
	case p.Threshold < 1:
		return fmt.Errorf("ratelimit: lockout threshold %d, want at least 1", p.Threshold)
	case p.Duration < time.Millisecond:
		return fmt.Errorf("ratelimit: lockout duration %s, want at least 1ms", p.Duration)
	case p.MaxDuration < p.Duration:
		return fmt.Errorf("ratelimit: longest lockout %s is shorter than the first, %s", p.MaxDuration, p.Duration)
	case p.MaxDuration > MaxWindow || p.Memory > MaxWindow:
		return fmt.Errorf("ratelimit: lockout durations above %s", MaxWindow)
	case p.Memory < 0:
		return fmt.Errorf("ratelimit: lockout memory %s is negative", p.Memory)
	case p.Memory > 0 && p.Memory < time.Millisecond:
		// Redis counts in whole milliseconds: a memory of 0 ms would
		// forget each failure as it is counted, and nothing would lock.
		return fmt.Errorf("ratelimit: lockout memory %s, want at least 1ms", p.Memory)
	}
	return nil
}

// Failure is what one recorded failure did.
type Failure struct {
	// LockedNow reports that this failure locked the identity. Exactly one
	// failure per lock reports it, however many arrive at once.
	LockedNow bool
	// Failures is the number of consecutive failures counted, this one
	// included; zero when the identity was already locked.
	Failures int
	// Level is how many times the identity has been locked recently: 1 for
	// the first lock, 2 for a repeat, and so on; 0 if never.
	Level int
	// LockedFor is, when locked, the time the lock has left.
	LockedFor time.Duration
}

// Lockouts count consecutive failures per identity and lock an identity at
// the policy's threshold, for Duration, doubling on each repeat up to
// MaxDuration. A [Rule] with the same name and Lockable set rejects while
// the identity is locked, in the same atomic step as its count.
type Lockouts struct {
	rdb    redis.UniversalClient
	keys   Keys
	policy LockoutPolicy
	// ladder is the tail of lockout.lua's ARGV: the lock durations.
	ladder []any
}

// MaxRememberedAttempts bounds how many distinct failed attempts a store
// remembers per identity (LockoutPolicy.RememberedAttempts), and so the
// memory an identity's attempts cost: at most 32 digests of 22 bytes.
const MaxRememberedAttempts = 32

// RememberedAttempts is how many distinct failed attempts a store
// remembers per identity (see Store.Fail): the threshold, as many as can
// count towards one lock, so a user cycling through fewer old passwords
// than that is never locked by them; at most MaxRememberedAttempts.
func (p LockoutPolicy) RememberedAttempts() int {
	return min(p.Threshold, MaxRememberedAttempts)
}

// attemptDigest is the form in which a store keeps an attempt: fixed in
// length whatever the caller passes, so that the bound on attempts is a
// bound on memory, and never the attempt itself.
func attemptDigest(attempt string) string {
	if attempt == "" {
		return ""
	}
	return Digest(attempt)
}

// NewLockouts returns the lockouts for rule name under prefix.
func NewLockouts(rdb redis.UniversalClient, prefix, name string, p LockoutPolicy) (*Lockouts, error) {
	keys, err := NewKeys(prefix, name)
	if err != nil {
		return nil, err
	}
	p, err = p.withDefaults()
	if err != nil {
		return nil, err
	}
	var ladder []any
	for _, ms := range p.ladder() {
		ladder = append(ladder, ms)
	}
	return &Lockouts{rdb: rdb, keys: keys, policy: p, ladder: ladder}, nil
}

// Fail records a failed attempt for id. A non-empty attempt fingerprints
// what was tried: one that id already failed with, among its last
// LockoutPolicy.RememberedAttempts, is not counted again (see Store.Fail).
func (l *Lockouts) Fail(ctx context.Context, id, attempt string) (Failure, error) {
	args := append([]any{l.policy.Threshold, ceilMillis(l.policy.Memory), attemptDigest(attempt), l.policy.RememberedAttempts()}, l.ladder...)
	vals, err := lockoutScript.run(ctx, l.rdb,
		[]string{l.keys.Key(id, ":failures"), l.keys.Key(id, ":level"), lockKey(l.keys, id), l.keys.Key(id, ":attempts")},
		args...,
	).Int64Slice()
	if err != nil {
		return Failure{}, fmt.Errorf("ratelimit: recording failure: %w", err)
	}
	if len(vals) != 4 {
		return Failure{}, fmt.Errorf("ratelimit: recording failure: unexpected reply %v", vals)
	}
	f := Failure{
		LockedNow: vals[0] == 1,
		Failures:  int(vals[1]),
		Level:     int(vals[2]),
		LockedFor: time.Duration(vals[3]) * time.Millisecond,
	}
	if !f.LockedNow && f.LockedFor > 0 {
		// The time left of a lock in force is its key's PTTL: whole
		// milliseconds, and Redis keeps the key through the last of
		// them; one more keeps it from being early, as a decision's
		// retry-after is kept (sliding_window.lua).
		f.LockedFor += time.Millisecond
	}
	return f, nil
}

// Clear ends id's lock, if any, and forgets its failures and the attempts
// they were: a successful sign-in or an administrator's unlock. The level
// is kept, so that a lock soon after still escalates, for the policy's
// Memory after the unlock, as after a lock that ends by itself. It reports
// whether id was locked.
func (l *Lockouts) Clear(ctx context.Context, id string) (wasLocked bool, err error) {
	n, err := clearScript.run(ctx, l.rdb,
		[]string{lockKey(l.keys, id), l.keys.Key(id, ":level"), l.keys.Key(id, ":failures"), l.keys.Key(id, ":attempts")},
		ceilMillis(l.policy.Memory),
	).Int64()
	if err != nil {
		return false, fmt.Errorf("ratelimit: clearing lockout: %w", err)
	}
	return n == 1, nil
}

// ClearBefore gives Redis the unlocks made elsewhere (in process, while
// Redis was away), each at its time: each ends its identity's lock if that
// began before it, and forgets its failures unless the last came after it.
// What came after an unlock stands: a lock made in Redis, through another
// replica, after an unlock made here. Sent as Hold sends its locks
// (inBatches).
func (l *Lockouts) ClearBefore(ctx context.Context, unlocks ...PastUnlock) error {
	err := inBatches(ctx, l.rdb, clearScript, unlocks, func(u PastUnlock) ([]string, []any) {
		return []string{lockKey(l.keys, u.ID), l.keys.Key(u.ID, ":level"), l.keys.Key(u.ID, ":failures"), l.keys.Key(u.ID, ":attempts")},
			append([]any{ceilMillis(l.policy.Memory), u.At.UnixMilli()}, l.ladder...)
	})
	if err != nil {
		return fmt.Errorf("ratelimit: clearing lockouts: %w", err)
	}
	return nil
}

// Hold puts locks recorded elsewhere into Redis (the locks made in process
// while Redis was down, when it is back): each only ever lengthens a lock
// and raises a level, and forgets the failures counted before it (see
// Store.Hold). Locks that have ended are skipped.
//
// After a large attack they may be tens of thousands: the script is loaded
// once, for a Redis that came back without its scripts, and run by its
// hash in pipelines of holdBatch, rather than each run sending its source
// (inBatches).
func (l *Lockouts) Hold(ctx context.Context, locks ...HeldLock) error {
	now := time.Now()
	live := make([]HeldLock, 0, len(locks))
	for _, h := range locks {
		if h.Until.After(now) {
			live = append(live, h)
		}
	}
	err := inBatches(ctx, l.rdb, holdScript, live, func(h HeldLock) ([]string, []any) {
		args := []any{max(h.Level, 1), max(ceilMillis(time.Until(h.Until)), 1), ceilMillis(l.policy.Memory)}
		if !h.Since.IsZero() {
			args = append(args, h.Since.UnixMilli())
		}
		return []string{lockKey(l.keys, h.ID), l.keys.Key(h.ID, ":level"), l.keys.Key(h.ID, ":failures")}, args
	})
	if err != nil {
		return fmt.Errorf("ratelimit: holding locks: %w", err)
	}
	return nil
}

// inBatches runs s once for each of items, with the keys and arguments
// that of gives, in pipelines of holdBatch, by the script's hash, loaded once
// first when there is more than one pipeline (a Redis back without its
// scripts would otherwise be sent the source with each run). Every batch
// is sent whatever another's answer: one key of the wrong type must not
// keep the runs after it out of Redis. It returns the first error
// (keepFirst).
func inBatches[T any](ctx context.Context, rdb redis.UniversalClient, s script, items []T, of func(T) ([]string, []any)) error {
	if len(items) > holdBatch {
		if err := rdb.ScriptLoad(ctx, s.src).Err(); err != nil {
			return err
		}
	}
	var first error
	for batch := range slices.Chunk(items, holdBatch) {
		cmds := s.runAll(ctx, rdb, len(batch), func(i int) ([]string, []any) { return of(batch[i]) })
		for _, cmd := range cmds {
			first = keepFirst(first, cmd.Err())
		}
		if ctx.Err() != nil {
			break
		}
	}
	return first
}

// holdBatch is how many locks Hold sends in one pipeline: enough that the
// round trips cost little beside the scripts, few enough that Redis
// buffers no more than a few megabytes of replies.
const holdBatch = 1024

// LockStatus is an identity's lockout state.
type LockStatus struct {
	// Locked reports whether the identity is locked now.
	Locked bool
	// RetryAfter is the time the lock has left.
	RetryAfter time.Duration
	// Failures is the number of consecutive failures counted so far.
	Failures int
	// Level is how many times the identity was locked recently.
	Level int
}

// Status reads id's lockout state without changing it.
func (l *Lockouts) Status(ctx context.Context, id string) (LockStatus, error) {
	pipe := l.rdb.Pipeline()
	ttl := pipe.PTTL(ctx, lockKey(l.keys, id))
	failures := pipe.Get(ctx, l.keys.Key(id, ":failures"))
	level := pipe.Get(ctx, l.keys.Key(id, ":level"))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return LockStatus{}, fmt.Errorf("ratelimit: reading lockout: %w", err)
	}
	s := LockStatus{}
	if d := ttl.Val(); d > 0 {
		// Whole milliseconds, the last of which the key lasts through
		// (see Fail).
		s.Locked, s.RetryAfter = true, d+time.Millisecond
	}
	s.Failures, _ = failures.Int()
	s.Level, _ = level.Int()
	return s, nil
}

// lockKey is where a Lockable rule looks for its identity's lock.
func lockKey(k Keys, id string) string { return k.Key(id, lockSuffix) }
