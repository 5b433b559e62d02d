package ratelimit

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"
)

// Local is the [Store] inside one process, with the same semantics as
// [RedisStore]: a sliding-window log per rule and identity, all-or-nothing
// across the rules of one request, lock checks for Lockable rules,
// escalating locks, each kept per rule name and identity. It is what a replica
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
// failures. Each of the three is kept in groups under its bound
// (groupedLRU): a rule's own, or, where its policy's Group (SetGroup for
// a rule without lockouts) sets a class of identities apart (an
// application's accounts, named at will by whoever holds its key), that
// class's. A flood of one group's entries,
// which for some cost little (failed API key checks and decision API
// reports need no hashing), pushes out its own rather than another
// group's. The locks restored from the lockout log (Hold) are pushed out
// by nothing while in force (lockTable).
//
// The identities are spread over shards, each with its own lock and its
// own least-recently-used order, so that decisions for different
// identities do not wait for each other. A request's rules lock their
// shards in one fixed order, which keeps each decision atomic.
type Local struct {
	now      func() time.Time
	policies map[string]LockoutPolicy // of the lockable rules, by name
	// others classes the identities of the rules without lockouts here
	// (SetGroup); nil: each such rule's are one class.
	others func(id string) string
	seed   maphash.Seed
	shards []localShard
}

// localShard holds the identities that hash to it.
type localShard struct {
	mu sync.Mutex
	// Each by group (Local.group) and by rule name and identity (ruleKey).
	logs     groupedLRU[*localLog]
	lockouts groupedLRU[*localLockout] // failure counts
	locks    lockTable                 // locks, in force or recent
}

// localLock is an identity's latest lock: until when, and its level, which
// the next lock escalates from.
type localLock struct {
	until time.Time
	level int
}

type localLog struct {
	times []time.Time // admission times, oldest first
}

type localLockout struct {
	failures int
	last     time.Time // last failure or lock end, for Memory
	// attempts are the digests of the recent failed attempts, oldest
	// first, at most LockoutPolicy.RememberedAttempts; forgotten with the
	// failures.
	attempts []string
	// flying are the attempts in flight (BeginAttempt), at most the
	// policy's threshold.
	flying []localAttempt
}

// DefaultLocalIdentities bounds a Local's memory: about 100 bytes plus 24
// bytes per admitted request for each identity, up to 40 bytes per
// remembered attempt (LockoutPolicy.RememberedAttempts) for each failing one,
// and about 60 per attempt in flight (BeginAttempt; at most the threshold).
const DefaultLocalIdentities = 100_000

// Shards: one per localShardSize identities of the bound, at most
// maxLocalShards. A small bound gets one shard and an exact LRU order.
const (
	localShardSize = 1024
	maxLocalShards = 64
)

// NewLocal returns an in-process store with the lockouts of each rule name
// in policies; now is its clock (nil: time.Now).
func NewLocal(policies map[string]LockoutPolicy, maxIdentities int, now func() time.Time) (*Local, error) {
	policies, err := lockoutPolicies(policies)
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
	l := &Local{now: now, policies: policies, seed: maphash.MakeSeed(), shards: make([]localShard, n)}
	for i := range l.shards {
		l.shards[i].logs = newGroupedLRU[*localLog](per)
		l.shards[i].lockouts = newGroupedLRU[*localLockout](per)
		l.shards[i].locks = newLockTable(per)
	}
	return l, nil
}

// SetGroup has l class the identities of the rules it keeps no lockouts
// for as group classes them, as a LockoutPolicy's Group classes its
// rule's: such a rule still keeps logs, and where one party names the
// identities that another's share it with (an application's accounts
// beside XCloak's own, in the reset requests' count per account), a flood
// of one party's logs must push out its own. Call it before l is used.
func (l *Local) SetGroup(group func(id string) string) { l.others = group }

// group is the group of id's log, failures and lock under rule name in
// their tables: the name, and the class its policy's Group (or, for a rule
// without lockouts, SetGroup's) gives id.
func (l *Local) group(name, id string) string {
	g := l.others
	if p, ok := l.policies[name]; ok {
		g = p.Group
	}
	if g != nil {
		if class := g(id); class != "" {
			return name + " " + class
		}
	}
	return name
}

// shard returns the index of the shard that holds id.
func (l *Local) shard(id string) int {
	if len(l.shards) == 1 {
		return 0
	}
	return int(maphash.String(l.seed, id) % uint64(len(l.shards)))
}

// Remembered answers false: a Local decides in process, with no memory of
// another store's answers to consult.
func (l *Local) Remembered(...Rule) (Decision, bool) { return Decision{}, false }

// AllowAll checks a request against every rule and records it in all of
// them only if all admit it.
func (l *Local) AllowAll(_ context.Context, rules ...Rule) (Decision, error) {
	if err := validRules(rules); err != nil {
		return Decision{}, err
	}
	for _, r := range rules {
		if _, ok := l.policies[r.Name]; r.Place != nil && !ok {
			return Decision{}, noLockouts(r.Name)
		}
	}
	return l.allowAll(rules, true), nil
}

// rejects reports whether AllowAll would reject rules now, and with what
// decision, recording nothing: what Failover asks, while it decides in
// process, before work that a rejection would make useless. rules are
// valid.
func (l *Local) rejects(rules []Rule) (Decision, bool) {
	d := l.allowAll(rules, false)
	return d, !d.Allowed
}

// allowAll is AllowAll for valid rules; an admission is recorded only if
// record is set.
func (l *Local) allowAll(rules []Rule, record bool) Decision {
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
		key, group := ruleKey(r.Name, r.ID), l.group(r.Name, r.ID)
		if r.LockOnly() {
			// No log: its lock alone decides.
			if left := lockedFor(sh, group, key, now); left > 0 {
				res.Locked, res.RetryAfter = true, left
				d.Allowed = false
				d.RetryAfter = max(d.RetryAfter, left)
			} else {
				res.Allowed = true
			}
			d.Results[i] = res
			continue
		}
		log, _ := sh.logs.get(group, key)
		count := 0
		if log != nil {
			// In this rule's window, as Redis counts: a log written by a
			// rule of another window (a setting changed, or the same log
			// named twice in a request) holds what that one kept.
			count = log.live(now, r.Limit.Window)
		}
		logs[i] = log
		res.Count = count
		if r.Lockable {
			res.RetryAfter = lockedFor(sh, group, key, now)
			res.Locked = res.RetryAfter > 0
		}
		if count >= r.Limit.Count {
			// Locked or not, no retry succeeds before the log has room.
			res.RetryAfter = max(res.RetryAfter, log.times[len(log.times)-r.Limit.Count].Add(r.Limit.Window).Sub(now))
		}
		res.Allowed = res.RetryAfter == 0
		res.Remaining = max(r.Limit.Count-count, 0)
		if !res.Allowed {
			d.Allowed = false
			d.RetryAfter = max(d.RetryAfter, res.RetryAfter)
		}
		d.Results[i] = res
	}
	if !d.Allowed || !record {
		// Nothing is recorded: a rejected request costs no memory.
		return d
	}
	// The places (Rule.Place), once every rule admits, taken all or
	// none: as far as the first refused, and none if one is.
	var places []*localLockout
	refused := false
	for i, r := range rules {
		if r.Place == nil || refused {
			continue
		}
		if places == nil {
			places = make([]*localLockout, len(rules))
		}
		f, wait, ok := l.placeFor(&l.shards[shards[i]], l.group(r.Name, r.ID), ruleKey(r.Name, r.ID), l.policies[r.Name],
			attemptDigest(r.Place.Attempt), now)
		if !ok {
			d.Results[i].InFlight, d.Results[i].RetryAfter = true, wait
			refused = true
		}
		places[i] = f
	}
	for i, f := range places {
		if f != nil && !refused {
			d.Results[i].Token = takePlace(f, now, rules[i].Place.TTL)
		}
	}
	for i, r := range rules {
		if r.LockOnly() {
			continue
		}
		if logs[i] == nil {
			sh := &l.shards[shards[i]]
			key, group := ruleKey(r.Name, r.ID), l.group(r.Name, r.ID)
			if logs[i], _ = sh.logs.get(group, key); logs[i] == nil {
				logs[i] = &localLog{}
				sh.logs.add(group, key, logs[i])
			}
		} else {
			// What left the longest window of the rules naming the log
			// goes, as in Redis.
			window := r.Limit.Window
			for j, o := range rules {
				if logs[j] == logs[i] {
					window = max(window, o.Limit.Window)
				}
			}
			logs[i].trim(now, window)
		}
		logs[i].times = append(logs[i].times, now)
		d.Results[i].Count++
		d.Results[i].Remaining--
	}
	return d
}

// ruleKey names the records of identity id under rule name: its log, its
// failures and its lock. The identity is sharded by id alone, so that all
// of them live in one shard.
func ruleKey(name, id string) string { return name + "\x00" + id }

// lockoutEntry is where the lockout of id under rule name lives: its
// policy, its key and group in the shard, and the shard, locked; the
// caller unlocks it. A rule without lockouts is noLockouts.
func (l *Local) lockoutEntry(name, id string) (p LockoutPolicy, sh *localShard, key, group string, err error) {
	p, ok := l.policies[name]
	if !ok {
		return p, nil, "", "", noLockouts(name)
	}
	sh = &l.shards[l.shard(id)]
	sh.mu.Lock()
	return p, sh, ruleKey(name, id), l.group(name, id), nil
}

// live is how many of log's entries are within window of now: its tail.
func (log *localLog) live(now time.Time, window time.Duration) int {
	i := 0
	for i < len(log.times) && !now.Before(log.times[i].Add(window)) {
		i++
	}
	return len(log.times) - i
}

// trim drops the entries that have left window.
func (log *localLog) trim(now time.Time, window time.Duration) {
	log.times = log.times[len(log.times)-log.live(now, window):]
}

// lockedFor is how long the lock of key in the lock table's group has
// left; sh holds it and is locked.
func lockedFor(sh *localShard, group, key string, now time.Time) time.Duration {
	lk, _ := sh.locks.get(group, key)
	if lk == nil || !now.Before(lk.until) {
		return 0
	}
	return lk.until.Sub(now)
}

// Fail records a failed attempt for id under the lockouts of rule name, as
// Lockouts.Fail does.
func (l *Local) Fail(_ context.Context, name, id, attempt string) (Failure, error) {
	p, sh, key, group, err := l.lockoutEntry(name, id)
	if err != nil {
		return Failure{}, err
	}
	defer sh.mu.Unlock()
	now := l.now()
	lk, _ := sh.locks.get(group, key)
	if lk != nil && now.Before(lk.until) {
		return Failure{Level: lk.level, LockedFor: lk.until.Sub(now)}, nil
	}
	level := 0
	if lk != nil {
		if now.Sub(lk.until) > p.Memory {
			lk.level = 0 // forgotten, as Redis lets the level expire
		}
		level = lk.level
	}
	f, _ := sh.lockouts.get(group, key)
	if f == nil {
		f = &localLockout{}
		sh.lockouts.add(group, key, f)
	}
	if !f.last.IsZero() && now.Sub(f.last) > p.Memory {
		f.failures, f.attempts = 0, nil
	}
	if attempt = attemptDigest(attempt); attempt != "" {
		if slices.Contains(f.attempts, attempt) {
			return Failure{Failures: f.failures, Level: level}, nil
		}
		if len(f.attempts) >= p.RememberedAttempts() {
			f.attempts = slices.Delete(f.attempts, 0, 1)
		}
		f.attempts = append(f.attempts, attempt)
	}
	f.last = now
	f.failures++
	if f.failures < p.Threshold {
		return Failure{Failures: f.failures, Level: level}, nil
	}
	n := f.failures
	level++
	d := p.LockFor(level)
	f.failures, f.last = 0, now.Add(d)
	if lk == nil {
		lk = &localLock{}
		sh.locks.add(group, key, lk)
	}
	lk.until, lk.level = now.Add(d), level
	return Failure{LockedNow: true, Failures: n, Level: level, LockedFor: d}, nil
}

// Clear ends id's lock under rule name and forgets its failures and their
// attempts, keeping the level.
func (l *Local) Clear(_ context.Context, name, id string) (bool, error) {
	_, sh, key, group, err := l.lockoutEntry(name, id)
	if err != nil {
		return false, err
	}
	defer sh.mu.Unlock()
	now := l.now()
	if f, _ := sh.lockouts.get(group, key); f != nil {
		f.failures, f.attempts = 0, nil
	}
	lk, _ := sh.locks.get(group, key)
	if lk == nil {
		return false, nil
	}
	was := now.Before(lk.until)
	if was {
		lk.until = now
	}
	return was, nil
}

// Hold puts locks recorded elsewhere (the lockouts in force when Redis
// was lost) into l. A lock l holds already is only ever lengthened, and the
// level only ever raised, so holding twice changes nothing; the failures
// counted before it are forgotten (see Store.Hold); locks that have ended
// are skipped.
func (l *Local) Hold(_ context.Context, locks ...HeldLock) error {
	locks, unknown := unknownLocks(locks, func(name string) bool { _, ok := l.policies[name]; return ok })
	now := l.now()
	// The locks an earlier Hold pinned that have ended go back among the
	// others, so that pinned locks are only ever those in force.
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		sh.locks.unpin(now)
		sh.mu.Unlock()
	}
	for _, h := range locks {
		if !now.Before(h.Until) {
			continue
		}
		key := ruleKey(h.Name, h.ID)
		sh := &l.shards[l.shard(h.ID)]
		sh.mu.Lock()
		group := l.group(h.Name, h.ID)
		lk, _ := sh.locks.get(group, key)
		if lk == nil {
			lk = &localLock{}
		}
		sh.locks.pin(group, key, lk)
		if h.Until.After(lk.until) {
			lk.until = h.Until
		}
		lk.level = max(lk.level, h.Level, 1)
		if f, _ := sh.lockouts.get(group, key); f != nil {
			f.failures = 0
		}
		sh.mu.Unlock()
	}
	return unknown
}

// ForgetLocks ends every lock l holds of the rules logged reports (every
// rule's if logged is nil), keeping the levels, the logs and the failures
// counted. A replica's in-process store keeps what it held in one outage,
// and what it was told to hold since (Hold), but learns of no unlock or
// password reset made through another replica: at the start of the next
// outage, before the lockouts in force are loaded again from the lockout
// log (Failover.Restore), what it held of the rules the log records is
// forgotten, so that no owner is refused for a lock that has ended. The
// locks of the other rules stay, as nothing would load them again: were
// they forgotten, whoever could cut a replica off from Redis again and
// again would be given a threshold of guesses each time, since a lock
// begins a new count. The failures stay for the same reason: forgotten,
// each outage would give one less than the threshold and never lock. A
// count that another replica's successful sign-in has ended stays too,
// for its Memory at most: it can only lock sooner.
func (l *Local) ForgetLocks(logged func(name string) bool) {
	now := l.now()
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		sh.locks.end(now, logged)
		sh.mu.Unlock()
	}
}

// Reset forgets every request recorded for id under the rule name.
func (l *Local) Reset(_ context.Context, name, id string) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("ratelimit: rule name %q: %w", name, err)
	}
	sh := &l.shards[l.shard(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.logs.remove(l.group(name, id), ruleKey(name, id))
	return nil
}
