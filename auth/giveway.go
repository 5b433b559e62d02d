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
// is one argon2id hash, about 20 ms of one core alone, and under such a
// flood it gets only the core's share the operating system gives its
// thread. So a rejected sign-in waits, before it is answered, until no
// password hash is running in this process. While a hash runs, the
// flood's requests park on a channel, costing no CPU, and a closed-loop
// flood stops sending until they are answered: the hash gets the core.
//
// The wait is bounded by rejectionGiveWay and by the request's context.
// It holds the request's goroutine and connection meanwhile, so an
// attacker who keeps hashes running (by sending admitted attempts) holds
// each of its own rejections up to the bound, at no cost to anyone else;
// a rejection waits no longer than that whatever the attacker sends.
//
// It tells an attacker nothing about its input: the wait depends only on
// whether some hash, anyone's, is running in this process when the
// rejection is decided, never on the account, the password or the rule
// that refused it (docs/SECURITY-MODEL.md, "Rejections give way to
// password checks").
//
// Only the sign-in's rejections wait (the JSON API and the form, and
// malformed sign-ins, all answered by Service.Login): they are the
// flood that competes with the returning user. A password reset's
// rejections come from a flow that hashes nothing before it mails, and
// an attacker floods it less for it gains nothing (the mail goes to the
// account's owner). Forward-auth and the decision API answer other
// applications' servers, which wait for the answer with threads of
// their own and their users behind them: holding those answers would
// move the cost onto the applications XCloak protects.

// rejectionGiveWay is the longest a rejected sign-in waits for the
// hashes in flight. One hash takes about 20 ms of a core alone, a few
// times that on a loaded machine with several running at once; 200 ms
// covers that, adds little to a 429 whose Retry-After is at least a
// second, and bounds what a held rejection costs (a goroutine and a
// connection) when hashes never stop.
const rejectionGiveWay = 200 * time.Millisecond

// inFlight counts work in flight (the password hashes) and lets others
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
// ctx ends, whichever comes first. With nothing in flight it costs one
// atomic load and allocates nothing.
func (f *inFlight) wait(ctx context.Context, limit time.Duration) {
	if f.n.Load() == 0 {
		return
	}
	f.mu.Lock()
	idle := f.idle
	f.mu.Unlock()
	if idle == nil || limit <= 0 {
		return
	}
	f.waiting.Add(1)
	defer f.waiting.Add(-1)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-idle:
	case <-timer.C:
	case <-ctx.Done():
	}
}
