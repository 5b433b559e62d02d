package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store decides requests against rules and keeps the lockouts of lockable
// rules. [RedisStore] keeps them in Redis, shared by every replica; [Local]
// keeps them in process; [Failover] puts one in front of the other. Every
// Store passes the same conformance suite (store_test.go), so a caller
// cannot tell them apart by what they decide.
type Store interface {
	// AllowAll checks a request against every rule and admits it only if
	// all of them do; a rejected request consumes quota in none. A
	// Lockable rule also rejects, with Result.Locked, while its identity
	// is locked under the rule's name. A rule with a Place also begins an
	// attempt against that lockout, as BeginAttempt does, in the same
	// step, once the request is admitted: its place is Result.Token. The
	// places of a request are taken all or none; where one is refused
	// (Result.InFlight) none is, and the request is admitted all the
	// same.
	AllowAll(ctx context.Context, rules ...Rule) (Decision, error)
	// Fail records a failed attempt for id under the lockouts of the rule
	// name, locking id at the policy's threshold, longer at each repeat
	// (LockoutPolicy.LockFor). Exactly one failure per lock reports
	// LockedNow, however many arrive at once.
	//
	// attempt is an opaque fingerprint of what was tried (a password's
	// keyed hash), "" for a failure that always counts. A failure with an
	// attempt that id already failed with under name, among its last
	// LockoutPolicy.RememberedAttempts and within the policy's Memory (the
	// attempts are forgotten with the failures), is not counted
	// again: it changes nothing and reports the failures counted so far,
	// never LockedNow. So a user retyping the same wrong password is not
	// locked out by it, while every distinct guess still counts. Stores
	// keep only a digest of each attempt.
	Fail(ctx context.Context, name, id, attempt string) (Failure, error)
	// Clear ends id's lock under the rule name, if any, and forgets its
	// failures and their attempts: a successful sign-in or an
	// administrator's unlock. The level is kept, so that a lock soon after
	// still escalates: for the policy's Memory from the unlock, which ends
	// the lock. It reports whether id was locked.
	Clear(ctx context.Context, name, id string) (wasLocked bool, err error)
	// BeginAttempt begins an attempt against id's lockout under the rule
	// name: one whose failure, if it is one, is yet to be counted (a
	// password being checked). It is refused while id is locked, and
	// while the failures counted and the attempts in flight reach the
	// policy's threshold together (never while none is in flight), so
	// that no number of attempts begun at once is made past the lock.
	// An allowed attempt holds its place until EndAttempt with its
	// token, or for ttl (1 ms to MaxWindow) if never ended. attempt
	// fingerprints what is tried, as Fail's does: one that Fail would not
	// count again goes ahead without a place ("" always takes one).
	BeginAttempt(ctx context.Context, name, id, attempt string, ttl time.Duration) (Begun, error)
	// EndAttempt ends the attempt token against id's lockout under the
	// rule name: after its failure, if any, is counted (Fail). Ending one
	// that has ended, or was never begun, changes nothing.
	EndAttempt(ctx context.Context, name, id, token string) error
	// Hold puts locks recorded elsewhere into the store: each only ever
	// lengthens a lock and raises a level, and locks that have ended are
	// skipped, so holding twice changes nothing. Like a lock that Fail
	// makes, a held one forgets the failures counted before it (not their
	// attempts), so that one failure after it ends does not lock again. A
	// lock of a rule the store keeps no lockouts for is skipped too, and
	// reported in an error that wraps ErrNoLockouts; the other locks are
	// held all the same.
	Hold(ctx context.Context, locks ...HeldLock) error
	// Reset forgets every request recorded for id under the rule name.
	Reset(ctx context.Context, name, id string) error
	// Remembered answers, from what the store remembers in process alone
	// (Limiter.RememberRejections), whether one of rules is known to
	// reject now: a rejection with Decision.FromMemory, and true. It
	// never admits, records nothing and makes no round trip, so a caller
	// can ask it before work that a rejection would make useless. A store
	// without such a memory, or that remembers none of rules, answers
	// false; false says nothing about what AllowAll would answer.
	Remembered(rules ...Rule) (Decision, bool)
}

var (
	_ Store = (*RedisStore)(nil)
	_ Store = (*Local)(nil)
	_ Store = (*Failover)(nil)
)

// HeldLock is a lock in force, as recorded outside the store that made it.
type HeldLock struct {
	// Name is the lockable rule the lock belongs to.
	Name string
	// ID is the identity locked.
	ID string
	// Until is when the lock ends.
	Until time.Time
	// Since is when the lock began, if known. An unlock given later with
	// its time (ClearBefore) ends only a lock that began before it; one
	// without Since is taken to have begun its level's length before
	// Until, or, longer than that (an administrator's), long ago.
	Since time.Time
	// Level is the lock's level (LockoutPolicy.LockFor), which the next
	// lock escalates from.
	Level int
}

// lockoutPolicies checks the policies of a store's lockable rules, by rule
// name, and fills in their defaults.
func lockoutPolicies(policies map[string]LockoutPolicy) (map[string]LockoutPolicy, error) {
	out := make(map[string]LockoutPolicy, len(policies))
	for _, name := range slices.Sorted(maps.Keys(policies)) {
		if err := checkName(name); err != nil {
			return nil, fmt.Errorf("ratelimit: lockout rule name %q: %w", name, err)
		}
		p, err := policies[name].withDefaults()
		if err != nil {
			return nil, fmt.Errorf("ratelimit: lockouts of %s: %w", name, err)
		}
		out[name] = p
	}
	return out, nil
}

// ErrNoLockouts is the error for a rule name a store keeps no lockouts for.
var ErrNoLockouts = errors.New("ratelimit: no lockouts for rule")

func noLockouts(name string) error {
	return fmt.Errorf("%w %q", ErrNoLockouts, name)
}

// unknownLocks splits locks into those of a rule that known reports, and
// an error (ErrNoLockouts) naming the rules of the others, nil if none.
func unknownLocks(locks []HeldLock, known func(name string) bool) ([]HeldLock, error) {
	var held []HeldLock
	var errs []error
	for _, h := range locks {
		if known(h.Name) {
			held = append(held, h)
		} else {
			errs = append(errs, noLockouts(h.Name))
		}
	}
	return held, errors.Join(errs...)
}

// PastUnlock is an unlock made at At elsewhere than the store it is given
// to: in process, while Redis was away (RedisStore.ClearBefore).
type PastUnlock struct {
	Name, ID string
	At       time.Time
}

// RedisStore is the Store every replica shares: the rules of a [Limiter]
// and, for each lockable rule name it was given a policy for, the
// [Lockouts] of that name, all on one Redis or Redis Cluster under one
// prefix.
type RedisStore struct {
	limiter  *Limiter
	lockouts map[string]*Lockouts // by rule name
}

// NewRedisStore returns the store on rdb whose keys start with prefix,
// with the lockouts of each rule name in policies (the account's and a
// browser's own, say).
func NewRedisStore(rdb redis.UniversalClient, prefix string, policies map[string]LockoutPolicy) (*RedisStore, error) {
	limiter, err := NewLimiter(rdb, prefix)
	if err != nil {
		return nil, err
	}
	policies, err = lockoutPolicies(policies)
	if err != nil {
		return nil, err
	}
	s := &RedisStore{limiter: limiter, lockouts: make(map[string]*Lockouts, len(policies))}
	for name, p := range policies {
		if s.lockouts[name], err = NewLockouts(rdb, prefix, name, p); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// RememberRejections makes the store remember recent rejections in process
// (see Limiter.RememberRejections); call it before s is used.
func (s *RedisStore) RememberRejections(ttl time.Duration, maxKeys int) {
	s.limiter.RememberRejections(ttl, maxKeys)
}

// OnTakeBackFailure makes the store call fn for each admission it could
// not take back (see Limiter.OnTakeBackFailure); call it before s is used.
func (s *RedisStore) OnTakeBackFailure(fn func(rule string, err error)) {
	s.limiter.OnTakeBackFailure(fn)
}

// AllowAll decides a request in one round trip (see Limiter.AllowAll).
func (s *RedisStore) AllowAll(ctx context.Context, rules ...Rule) (Decision, error) {
	return s.limiter.decideWith(ctx, rules, s.lockouts, make([]Result, len(rules)))
}

// Fail records a failed attempt for id under the lockouts of rule name.
func (s *RedisStore) Fail(ctx context.Context, name, id, attempt string) (Failure, error) {
	l := s.lockouts[name]
	if l == nil {
		return Failure{}, noLockouts(name)
	}
	return l.Fail(ctx, id, attempt)
}

// Clear ends id's lock under rule name and forgets its failures, keeping
// the level; this process also forgets a rejection it remembers for it.
func (s *RedisStore) Clear(ctx context.Context, name, id string) (bool, error) {
	l := s.lockouts[name]
	if l == nil {
		return false, noLockouts(name)
	}
	// Forgotten after the lock is gone, so that no rejection seen in
	// between is remembered past the unlock.
	defer s.limiter.Forget(name, id)
	return l.Clear(ctx, id)
}

// Hold puts locks recorded elsewhere into Redis (see Lockouts.Hold). Every
// rule's locks are sent whatever another's answer, as Lockouts.Hold sends
// every batch: a key of the wrong type under one rule, which a failback
// logs and does not give again, must not keep the others' locks out of
// Redis. It returns the first error (keepFirst).
func (s *RedisStore) Hold(ctx context.Context, locks ...HeldLock) error {
	locks, unknown := unknownLocks(locks, func(name string) bool { return s.lockouts[name] != nil })
	byName := map[string][]HeldLock{}
	for _, h := range locks {
		byName[h.Name] = append(byName[h.Name], h)
	}
	var first error
	for name, held := range byName {
		first = keepFirst(first, s.lockouts[name].Hold(ctx, held...))
		if ctx.Err() != nil {
			break
		}
	}
	if first != nil {
		return first
	}
	return unknown
}

// ClearBefore gives Redis unlocks made elsewhere, each ending only what
// came before it (see Lockouts.ClearBefore); this process forgets the
// rejections it remembers for them. Unlocks of a rule without lockouts
// here are skipped and reported (ErrNoLockouts), as Hold reports locks,
// and every rule's are sent whatever another's answer, as Hold sends
// them.
func (s *RedisStore) ClearBefore(ctx context.Context, unlocks ...PastUnlock) error {
	byName := map[string][]PastUnlock{}
	var errs []error
	for _, u := range unlocks {
		if s.lockouts[u.Name] == nil {
			errs = append(errs, noLockouts(u.Name))
			continue
		}
		byName[u.Name] = append(byName[u.Name], u)
	}
	var first error
	for name, us := range byName {
		err := s.lockouts[name].ClearBefore(ctx, us...)
		for _, u := range us {
			s.limiter.Forget(name, u.ID)
		}
		first = keepFirst(first, err)
		if ctx.Err() != nil {
			break
		}
	}
	if first != nil {
		return first
	}
	return errors.Join(errs...)
}

// keepFirst returns, of the errors of several calls, first so far and err
// next, the one to report: the first, but one by which Redis did not
// answer (IsSlow, IsOutage) rather than an error reply. A failback takes
// an error reply for Redis' answer, and would forget what Redis was never
// given.
func keepFirst(first, err error) error {
	bg := context.Background()
	missed := func(e error) bool { return IsSlow(bg, e) || IsOutage(bg, e) }
	if first == nil || err != nil && missed(err) && !missed(first) {
		return err
	}
	return first
}

// Remembered answers from the rejections this process remembers (see
// Limiter.Remembered).
func (s *RedisStore) Remembered(rules ...Rule) (Decision, bool) {
	return s.limiter.Remembered(rules...)
}

// Reset forgets every request recorded for id under the rule name.
func (s *RedisStore) Reset(ctx context.Context, name, id string) error {
	return s.limiter.Reset(ctx, name, id)
}
