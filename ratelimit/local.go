package ratelimit

import (
	"context"
	"hash/maphash"
	"slices"
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
// Memory is bounded: at most maxIdentities logs, as many failure counts
// and as many locks are kept. When full, the least recently used is
// forgotten to make room, so a flood of fresh identities never stops a new
// one from being served; an identity under attack is used at every attempt
// and stays. Locks are kept apart from logs and failure counts, so that a
// flood of fresh identities, admitted or failing, does not push them out:
// only other locks can, and each of those costs an attacker a threshold of
// failures.
//
// The identities are spread over shards, each with its own lock and its
// own least-recently-used order, so that decisions for different
// identities do not wait for each other. A request's rules lock their
// shards in one fixed order, which keeps each decision atomic.
type Local struct {
	now    func() time.Time
	policy LockoutPolicy
	name   string // the lockouts' rule name
	seed   maphash.Seed
	shards []localShard
}

// localShard holds the identities that hash to it.
type localShard struct {
	mu       sync.Mutex
	logs     lru[*localLog]     // by rule name and identity
	lockouts lru[*localLockout] // failure counts, by identity
	locks    lru[*localLock]    // locks, in force or recent, by identity
}

// localLock is an identity's latest lock: until when, and its level, which
// the next lock escalates from.
type localLock struct {
	until time.Time
	level int
}

type localLog struct {
	times  []time.Time // admission times, oldest first
	window time.Duration
}

type localLockout struct {
	failures int
	last     time.Time // last failure or lock end, for Memory
}

// DefaultLocalIdentities bounds a Local's memory: about 100 bytes plus 24
// bytes per admitted request for each identity.
const DefaultLocalIdentities = 100_000

// Shards: one per localShardSize identities of the bound, at most
// maxLocalShards. A small bound gets one shard and an exact LRU order.
const (
	localShardSize = 1024
	maxLocalShards = 64
)

// NewLocal returns an in-process limiter whose lockouts belong to rule name
// with policy p; now is its clock (nil: time.Now).
func NewLocal(name string, p LockoutPolicy, maxIdentities int, now func() time.Time) (*Local, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	if maxIdentities <= 0 {
		maxIdentities = DefaultLocalIdentities
	}
	n := min(max(maxIdentities/localShardSize, 1), maxLocalShards)
	per := (maxIdentities + n - 1) / n
	l := &Local{now: now, policy: p, name: name, seed: maphash.MakeSeed(), shards: make([]localShard, n)}
	for i := range l.shards {
		l.shards[i].logs = newLRU[*localLog](per)
		l.shards[i].lockouts = newLRU[*localLockout](per)
		l.shards[i].locks = newLRU[*localLock](per)
	}
	return l, nil
}

// shard returns the index of the shard that holds id.
func (l *Local) shard(id string) int {
	if len(l.shards) == 1 {
		return 0
	}
	return int(maphash.String(l.seed, id) % uint64(len(l.shards)))
}

// AllowAll checks a request against every rule and records it in all of
// them only if all admit it.
func (l *Local) AllowAll(_ context.Context, rules ...Rule) (Decision, error) {
	if err := validRules(rules); err != nil {
		return Decision{}, err
	}
	// Each rule's shard, and the shards to lock in ascending order.
	var buf [4]int
	shards := buf[:0]
	for _, r := range rules {
		shards = append(shards, l.shard(r.ID))
	}
	held := slices.Compact(slices.Sorted(slices.Values(shards)))
	for _, i := range held {
		l.shards[i].mu.Lock()
	}
	defer func() {
		for _, i := range held {
			l.shards[i].mu.Unlock()
		}
	}()

	now := l.now()
	d := Decision{Allowed: true, Results: make([]Result, len(rules))}
	logs := make([]*localLog, len(rules))
	for i, r := range rules {
		sh := &l.shards[shards[i]]
		res := Result{Name: r.Name, Limit: r.Limit}
		log, _ := sh.logs.get(logKey(r))
		count := 0
		if log != nil {
			log.trim(now)
			count = len(log.times)
		}
		logs[i] = log
		res.Count = count
		switch {
		case r.Lockable && lockedFor(sh, r.ID, now) > 0:
			res.Locked, res.RetryAfter = true, lockedFor(sh, r.ID, now)
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
		// Nothing is recorded: a rejected request costs no memory.
		return d, nil
	}
	for i, r := range rules {
		if logs[i] == nil {
			sh := &l.shards[shards[i]]
			key := logKey(r)
			if logs[i], _ = sh.logs.get(key); logs[i] == nil {
				logs[i] = &localLog{window: r.Limit.Window}
				sh.logs.add(key, logs[i])
			}
		}
		logs[i].times = append(logs[i].times, now)
		d.Results[i].Count++
		d.Results[i].Remaining--
	}
	return d, nil
}

func logKey(r Rule) string { return r.Name + "\x00" + r.ID }

func (log *localLog) trim(now time.Time) {
	i := 0
	for i < len(log.times) && !now.Before(log.times[i].Add(log.window)) {
		i++
	}
	log.times = log.times[i:]
}

// lockedFor is how long id's lock has left; sh holds id and is locked.
func lockedFor(sh *localShard, id string, now time.Time) time.Duration {
	lk, _ := sh.locks.get(id)
	if lk == nil || !now.Before(lk.until) {
		return 0
	}
	return lk.until.Sub(now)
}

// Fail records a failed attempt for id, as Lockouts.Fail does.
func (l *Local) Fail(_ context.Context, id string) (Failure, error) {
	sh := &l.shards[l.shard(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := l.now()
	lk, _ := sh.locks.get(id)
	if lk != nil && now.Before(lk.until) {
		return Failure{Level: lk.level, LockedFor: lk.until.Sub(now)}, nil
	}
	level := 0
	if lk != nil {
		if now.Sub(lk.until) > l.policy.Memory {
			lk.level = 0 // forgotten, as Redis lets the level expire
		}
		level = lk.level
	}
	f, _ := sh.lockouts.get(id)
	if f == nil {
		f = &localLockout{}
		sh.lockouts.add(id, f)
	}
	if !f.last.IsZero() && now.Sub(f.last) > l.policy.Memory {
		f.failures = 0
	}
	f.last = now
	f.failures++
	if f.failures < l.policy.Threshold {
		return Failure{Failures: f.failures, Level: level}, nil
	}
	n := f.failures
	level++
	d := l.policy.LockFor(level)
	f.failures, f.last = 0, now.Add(d)
	if lk == nil {
		lk = &localLock{}
		sh.locks.add(id, lk)
	}
	lk.until, lk.level = now.Add(d), level
	return Failure{LockedNow: true, Failures: n, Level: level, LockedFor: d}, nil
}

// Clear ends id's lock and forgets its failures, keeping the level.
func (l *Local) Clear(_ context.Context, id string) (bool, error) {
	sh := &l.shards[l.shard(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := l.now()
	if f, _ := sh.lockouts.get(id); f != nil {
		f.failures = 0
	}
	lk, _ := sh.locks.get(id)
	if lk == nil {
		return false, nil
	}
	was := now.Before(lk.until)
	if was {
		lk.until = now
	}
	return was, nil
}

// Restore puts locks recorded elsewhere (the lockouts in force when Redis
// was lost) into l. A lock l holds already is only ever lengthened, and the
// level only ever raised, so restoring twice changes nothing.
func (l *Local) Restore(locks ...HeldLock) {
	now := l.now()
	for _, h := range locks {
		if !now.Before(h.Until) {
			continue
		}
		sh := &l.shards[l.shard(h.ID)]
		sh.mu.Lock()
		lk, _ := sh.locks.get(h.ID)
		if lk == nil {
			lk = &localLock{}
			sh.locks.add(h.ID, lk)
		}
		if h.Until.After(lk.until) {
			lk.until = h.Until
		}
		lk.level = max(lk.level, h.Level)
		if f, _ := sh.lockouts.get(h.ID); f != nil {
			f.failures = 0
		}
		sh.mu.Unlock()
	}
}
