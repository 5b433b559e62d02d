package auth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Ended sessions. A session that has ended (signed out, expired, ended by
// its owner, an administrator or a password change) never comes back, and
// no new session can take its token, which is minted with the session. So
// once a replica has found that a token names no session, it may say so
// again without a query: a copy of an ended session's cookie, kept and
// sent over and over, costs at most one query per endedSessionTTL on each
// replica. Only tokens this service made get here (sessiontoken.go), so
// a flood of made-up ones neither costs a query nor fills this memory.
const (
	endedSessionTTL = time.Minute
	endedSessionMax = 50_000
)

// endedSessions remembers the hashes of tokens found to name no session.
type endedSessions struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]time.Time // when each was found so
}

// has reports whether key was found ended less than endedSessionTTL
// before now.
func (e *endedSessions) has(key [sha256.Size]byte, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.m[key]
	return ok && !now.Before(at) && now.Sub(at) < endedSessionTTL
}

// add notes that key names no session as of now.
func (e *endedSessions) add(key [sha256.Size]byte, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = make(map[[sha256.Size]byte]time.Time)
	}
	if len(e.m) >= endedSessionMax {
		for k, at := range e.m {
			if now.Before(at) || now.Sub(at) >= endedSessionTTL {
				delete(e.m, k)
			}
		}
		if len(e.m) >= endedSessionMax {
			// More ended sessions sent within a minute than the bound:
			// start over rather than scan for a victim on every add.
			clear(e.m)
		}
	}
	e.m[key] = now
}
