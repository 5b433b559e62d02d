package auth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Ended sessions. A session whose row is gone from the store (signed out,
// ended by its owner, an administrator or a password change, swept once
// expired) never comes back, and no new session can take its token, which
// is minted with the session. So once a replica has found that no row
// holds a token, it may say so again without a query: a copy of an ended
// session's cookie, kept and sent over and over, costs at most one query
// per endedSessionTTL on each replica. A session this replica's own
// settings end (a SessionTTL or an idle time shorter than those it was
// made under) keeps its row, which other replicas, or this one after the
// setting is changed back, may still honour: that is not remembered, so a
// sign-out still deletes it. Only tokens this service made get here
// (sessiontoken.go), so a flood of made-up ones neither costs a query nor
// fills this memory.
const (
	endedSessionTTL = time.Minute
	endedSessionMax = 50_000
)

// endedSessions remembers the hashes of tokens no row holds, in two
// generations: entries go into cur until it is endedSessionTTL old or holds
// endedSessionMax, when it becomes prev and a new cur starts. Each add and
// each look is O(1), whatever the rate of a flood, and at most twice the
// bound is kept.
type endedSessions struct {
	mu        sync.Mutex
	cur, prev map[[sha256.Size]byte]time.Time // when each was found so
	curStart  time.Time
}

// has reports whether key was found ended less than endedSessionTTL
// before now.
func (e *endedSessions) has(key [sha256.Size]byte, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range [2]map[[sha256.Size]byte]time.Time{e.cur, e.prev} {
		if at, ok := m[key]; ok && !now.Before(at) && now.Sub(at) < endedSessionTTL {
			return true
		}
	}
	return false
}

// add notes that no row holds key as of now.
func (e *endedSessions) add(key [sha256.Size]byte, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil || len(e.cur) >= endedSessionMax || now.Before(e.curStart) || now.Sub(e.curStart) >= endedSessionTTL {
		e.prev, e.cur, e.curStart = e.cur, make(map[[sha256.Size]byte]time.Time), now
	}
	e.cur[key] = now
}
