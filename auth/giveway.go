package auth

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Rejected sign-ins give way to the password checks in flight.
//
// A flood of sign-ins that the limits refuse is answered from memory: no
// hashing, no Postgres, no Redis round trip. Each answer still costs some
// CPU, and a client that sends as fast as it is answered (a closed loop,
// as every stuffing tool is) fills every core whatever an answer costs:
// answering faster only means answering more. A returning user's sign-in
// is one argon2id hash, about 20 ms of one core alone, and a few queries
// around it, and under such a flood each gets only the share of a core
// the operating system gives it. So a rejected sign-in waits, before it
// is answered, until no password check is in flight in this process: no
// hash running (any flow's), and no sign-in between its admission by the
// limits and its answer, or, for a browser holding a device cookie this
// server signed for the account, between the cookie's check and the
// answer, so that its device's lookup and its decision are covered too.
// While one is in flight the flood's requests park on a channel, costing
// no CPU, and a closed-loop flood stops sending until they are answered:
// the check gets the cores.
//
// The wait is bounded by rejectionGiveWay and by the request's context.
// It holds the request's goroutine and connection meanwhile, so an
// attacker who keeps checks in flight (admitted attempts, or sign-ins
// with a device cookie of an account it holds) holds rejections up to
// the bound, its own among them; a rejection waits no longer than that
// whatever anyone sends.
//
// It tells an attacker nothing about its input: the wait depends only on
// whether some check, anyone's, is in flight in this process when the
// rejection is decided, never on the account, the password or the rule
// that refused it (docs/SECURITY-MODEL.md, "Rejections give way to
// password checks").
//
// Only the sign-in's rejections wait (the JSON API and the form, and
// malformed sign-ins, all answered by Service.Login): they are the
// flood that competes with the returning user. A password reset's
// rejections come from a flow that hashes nothing before it mails, and
// an attacker gains nothing by flooding it (the mail goes to the
// account's owner). Forward-auth and the decision API answer other
// applications' servers, which wait for the answer with threads of
// their own and their users behind them: holding those answers would
// move the cost onto the applications XCloak protects.

// Hashes give way to a returning browser's sign-in too. A stuffing run is
// admitted up to the account's limit for every account it tries, and each
// admitted attempt costs a hash (an unknown account's as much as a known
// one's): those hashes share the cores with the returning user's, which
// VerifyTrusted's reserved slot lets start but not run alone. So a hash
// that is not VerifyTrusted's waits, at most hashGiveWay in all, until no
// sign-in with a valid device cookie is in flight between the cookie's
// check and its answer (its device's lookup, its decision, its hash and
// its session's writes): before it queues for a slot, and again, keeping
// the slot it got, if such a sign-in began while it queued, as the
// returning user's next sign-in does when a flood's admitted attempts
// queue for every slot at its start. A valid cookie is one this server
// signed for the account after a sign-in with its password, so an
// attacker who holds one (of an account of its own) and sends it on
// every request delays the others' hashes by at most hashGiveWay each,
// and fails none that got a slot; a hash that keeps its slot meanwhile
// holds the one behind it in the queue as long, within its 2 s for a
// slot. With many returning users signing in at once, a new browser's
// sign-in may wait as long. Neither tells anything about the account the
// delayed sign-in names.
//
// A sign-in never gives way to itself. A valid cookie whose device is not
// known (forgotten by its owner, or not looked up) ends its mark once
// that is found, before its hash, which is another browser's; a known
// device's rehash is trusted like its VerifyTrusted (hashTrusted).
// Otherwise its own hashes would wait out hashGiveWay for its own mark:
// the returning user slower than anyone, and a sign-in whose time tells
// whether the cookie it sent is valid.

// hashGiveWay is the longest a hash waits for the returning browsers'
// sign-ins in flight: one's hash takes about 20 ms of a core alone, and 100 ms
// covers a few in a row on a loaded machine while adding little to a
// sign-in that answers after a hash anyway.
const hashGiveWay = 100 * time.Millisecond

// rejectionGiveWay is the longest a rejected sign-in waits for the
// password checks in flight. One hash takes about 20 ms of a core alone, a few
// times that on a loaded machine with several running at once; 200 ms
// covers that, adds little to a 429 whose Retry-After is at least a
// second, and bounds what a held rejection costs (a goroutine and a
// connection) when checks never stop.
const rejectionGiveWay = 200 * time.Millisecond

// inFlight counts work in flight (the password checks) and lets others
// wait until there is none.
type inFlight struct {
	// n is the work in flight, written under mu and read alone by wait's
	// fast path.
	n  atomic.Int64
	mu sync.Mutex
	// idle is closed when n drops to 0; nil while n is 0.
	idle chan struct{}
	// waiting is the number of callers in wait, for metrics and tests.
	waiting atomic.Int64
}

func (f *inFlight) start() {
	f.mu.Lock()
	if f.n.Add(1) == 1 {
		f.idle = make(chan struct{})
	}
	f.mu.Unlock()
}

func (f *inFlight) end() {
	f.mu.Lock()
	if f.n.Add(-1) == 0 {
		close(f.idle)
		f.idle = nil
	}
	f.mu.Unlock()
}

// wait returns when nothing is in flight, after at most limit, or when
// ctx ends, whichever comes first, and says how long it waited. With
// nothing in flight it costs one atomic load, reads no clock and
// allocates nothing.
func (f *inFlight) wait(ctx context.Context, limit time.Duration) time.Duration {
	if f.n.Load() == 0 {
		return 0
	}
	f.mu.Lock()
	idle := f.idle
	f.mu.Unlock()
	if idle == nil || limit <= 0 {
		return 0
	}
	f.waiting.Add(1)
	defer f.waiting.Add(-1)
	start := time.Now()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-idle:
	case <-timer.C:
	case <-ctx.Done():
	}
	return time.Since(start)
}
