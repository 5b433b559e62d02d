package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"
)

// rejections remembers, in one process, the rules that Redis recently said
// were full. A full rule stays full until its oldest needed entry leaves the
// window: rejected requests write nothing, and other admissions only add
// entries. So while a remembered rejection lasts, the same answer can be
// given without asking Redis, and a flood against one account or from one
// network costs no round trip at all after the first rejection.
//
// It only ever rejects, never admits, so no request passes a limit because
// of it. It can reject a little longer than Redis would when an entry is
// taken back (a request rejected by another rule), a rule is Reset or an
// account is unlocked on another replica, so each memory is kept at most
// ttl (one second by default), which bounds that delay. An unlock through
// this process forgets the account at once (Limiter.Forget), and the
// answers Redis gave before it that arrive after it are not remembered
// (forgets).
type rejections struct {
	ttl time.Duration
	max int

	// forgets counts the calls of forget. A decision reads it before it
	// asks Redis and remembers the answer only if it has not moved since
	// (remember's asked): an answer that read a lock before an unlock,
	// and arrives after the unlock forgot it, would otherwise be
	// remembered past the unlock. Any forget counts, whatever identity
	// it was of: unlocks are rare, and a decision that then goes
	// unremembered only asks Redis again next time.
	forgets atomic.Uint64

	mu    sync.Mutex
	until map[ruleID]rejection
	// nextSweep is, once a sweep left the memory full, when its earliest
	// memory ends: no sweep before then could free a place, and a flood
	// over more identities than max would otherwise scan every memory,
	// under mu, for each rejection.
	nextSweep time.Time
	sweeps    int // sweeps made, for tests
}

// ruleID names what a memory is of: a rule's name and the identity it
// limits, as given, not its key. Looking a request's rules up by it costs
// no key building and no hashing of the identity, so a remembered
// rejection costs a map lookup. A Limiter has one prefix, and rules of one
// name share their logs, so it names one log as its key does.
// An identity is kept as given, so an entry takes the identity's length
// (an address, a normalised email, a spraying key: tens to a few hundred
// bytes) where a key took about 60; the number of entries is bounded as
// before.
type ruleID struct {
	name, id string
}

type rejection struct {
	forget  time.Time // when this memory ends: at most ttl after Redis' answer
	retryAt time.Time // when Redis said a retry can succeed
	locked  bool      // the rule rejected because its identity is locked out
	// lockOnly: the rule was a lock-only one (Rule.LockOnly), whose
	// retryAt is the lock's end. A rule of the same name with a limit
	// rejects for its log too, full for up to its window, which is no
	// answer for a lock-only rule, and a lock's end may come before its
	// log has room: each answers only rules of its kind.
	lockOnly bool
}

func newRejections(ttl time.Duration, max int) *rejections {
	return &rejections{ttl: ttl, max: max, until: make(map[ruleID]rejection)}
}

// lookup returns the retry-after of key's remembered rejection (0 if none)
// and whether it was a lockout, for a rule with a limit.
func (r *rejections) lookup(key ruleID, now time.Time) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookupLocked(key, false, now)
}

// lookupLocked is lookup with r.mu held, so that a request's rules are
// looked up under one lock, not one each. A lock-only rule (lockOnly) is
// answered only by a lock-only rule's rejection, whose retry-after is the
// lock's, and a rule with a limit only by one of a rule with a limit.
func (r *rejections) lookupLocked(key ruleID, lockOnly bool, now time.Time) (time.Duration, bool) {
	m, ok := r.until[key]
	if !ok {
		return 0, false
	}
	if !now.Before(m.forget) {
		delete(r.until, key)
		return 0, false
	}
	if lockOnly != m.lockOnly {
		return 0, false
	}
	return m.retryAt.Sub(now), m.locked
}

// forget drops key's memory, and keeps the answers of the decisions in
// flight from being remembered (forgets).
func (r *rejections) forget(key ruleID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.until, key)
	r.forgets.Add(1)
}

// asking returns what a decision passes to remember as asked: read before
// it asks Redis.
func (r *rejections) asking() uint64 { return r.forgets.Load() }

// remember notes that key rejects for retryAfter from now, for at most
// ttl, unless a memory was forgotten since asked (asking) was read;
// lockOnly if the rule that rejected was a lock-only one.
func (r *rejections) remember(key ruleID, retryAfter time.Duration, locked, lockOnly bool, now time.Time, asked uint64) {
	d := min(retryAfter, r.ttl)
	if d <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.forgets.Load() != asked {
		return // an unlock came between Redis' answer and now
	}
	if len(r.until) >= r.max {
		if now.Before(r.nextSweep) {
			return // full of live memories: ask Redis
		}
		r.sweeps++
		var earliest time.Time
		for k, m := range r.until {
			if !now.Before(m.forget) {
				delete(r.until, k)
			} else if earliest.IsZero() || m.forget.Before(earliest) {
				earliest = m.forget
			}
		}
		if len(r.until) >= r.max {
			r.nextSweep = earliest
			return
		}
	}
	r.until[key] = rejection{forget: now.Add(d), retryAt: now.Add(retryAfter), locked: locked, lockOnly: lockOnly}
}
