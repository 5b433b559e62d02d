package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"time"
)

// Sessions for reverse proxies. Forward-auth asks about the session of
// every request of every protected application, so ProxySession answers
// from a cache in each replica: token hash to session, each answer trusted
// for at most sessionCacheTTL from the moment its read began. A session
// ended anywhere (sign-out, a session ended from the account page, "sign
// out everywhere" and the administrators' sign-out, a password reset or
// change, attack mode's sign-out of new devices) therefore stops passing
// on every replica within that bound; on the replica that ended it, the
// cache is emptied at once. A changed role or a lifted MustChangePassword
// shows within the same bound.
//
// Only answers that found a session are kept, so a flood of made-up
// tokens cannot push real sessions out by filling the cache; it costs no
// query either, since a token this service did not make fails its tag
// (sessiontoken.go). Concurrent
// misses for one token share one read, so a busy browser's many requests
// cost one query a second per replica, not one per request in flight when
// its entry lapses.

const (
	// sessionCacheTTL bounds how long a replica trusts a remembered
	// session.
	sessionCacheTTL = time.Second
	// sessionCacheMax bounds the sessions remembered.
	sessionCacheMax = 100_000
)

// sessionCache remembers recent answers of ProxySession.
type sessionCache struct {
	mu sync.RWMutex
	m  map[[sha256.Size]byte]cachedSession
	// gen counts purges, so that a read that began before one does not
	// store what it read after it.
	gen uint64
	// reads are the reads in flight, by token hash, for lookups to share.
	reads map[[sha256.Size]byte]*sessionRead
}

// sessionRead is one read of a session from the store that concurrent
// lookups of the same token share; done is closed when sess and err are
// set.
type sessionRead struct {
	gen uint64
	// started is when the read began: its answer is trusted no longer
	// than an entry of the cache, so no lookup joins it after that.
	started time.Time
	// forgotten: the session was signed out on this replica while the
	// read ran, so its answer is not stored.
	forgotten bool
	done      chan struct{}
	sess      Session
	err       error
}

type cachedSession struct {
	sess  Session
	until time.Time
}

// get returns the session remembered for key while it is trusted and
// unexpired at now.
func (c *sessionCache) get(key [sha256.Size]byte, now time.Time) (Session, bool) {
	c.mu.RLock()
	e, ok := c.m[key]
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) || !now.Before(e.sess.ExpiresAt) {
		return Session{}, false
	}
	return e.sess, true
}

// generation is the count of purges so far, read before a lookup.
func (c *sessionCache) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

// join returns the read of key in flight in the current generation that
// began less than sessionCacheTTL before now, or starts one (leader
// true): the leader reads, then calls finish.
func (c *sessionCache) join(key [sha256.Size]byte, now time.Time) (read *sessionRead, leader bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.reads[key]; ok && r.gen == c.gen && now.Before(r.started.Add(sessionCacheTTL)) {
		return r, false
	}
	if c.reads == nil {
		c.reads = make(map[[sha256.Size]byte]*sessionRead)
	}
	r := &sessionRead{gen: c.gen, started: now, done: make(chan struct{})}
	c.reads[key] = r
	return r, true
}

// finish ends the leader's read, storing a session found until until
// unless the cache was purged meanwhile, and hands the answer to the
// lookups that joined it.
func (c *sessionCache) finish(key [sha256.Size]byte, r *sessionRead, until, now time.Time) {
	c.mu.Lock()
	if r.err == nil && !r.forgotten {
		c.putLocked(key, r.sess, until, r.gen, now)
	}
	if c.reads[key] == r {
		delete(c.reads, key)
	}
	c.mu.Unlock()
	close(r.done)
}

// put remembers sess until until, unless the cache was purged since gen.
func (c *sessionCache) put(key [sha256.Size]byte, sess Session, until time.Time, gen uint64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(key, sess, until, gen, now)
}

// putLocked is put with c.mu held.
func (c *sessionCache) putLocked(key [sha256.Size]byte, sess Session, until time.Time, gen uint64, now time.Time) {
	if c.gen != gen {
		return
	}
	if c.m == nil {
		c.m = make(map[[sha256.Size]byte]cachedSession)
	}
	if len(c.m) >= sessionCacheMax {
		for k, e := range c.m {
			if !now.Before(e.until) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= sessionCacheMax {
			// More live sessions than the bound within one TTL: start
			// over rather than scan for a victim on every put.
			clear(c.m)
		}
	}
	c.m[key] = cachedSession{sess: sess, until: until}
}

// forget forgets one session: after it ended on this replica. A read of
// it in flight is neither stored nor joined; the reads of other sessions
// go on, since anyone can sign out with a made-up cookie.
func (c *sessionCache) forget(key [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.reads[key]; ok {
		r.forgotten = true
		delete(c.reads, key)
	}
	delete(c.m, key)
}

// purge forgets every session: after a revocation on this replica. Call
// it once the store has the revocation, so that no read from before it
// is stored after it.
func (c *sessionCache) purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.m)
}

// ProxySession is Session for the reverse proxies' questions
// (forward-auth): the same answer, but possibly remembered from up to a
// second before (see sessionCache). XCloak's own pages use Session, which
// reads the store every time.
//
// Errors: ErrNoSession, ErrUnavailable.
func (s *Service) ProxySession(ctx context.Context, token string) (Session, error) {
	// Only the shape here, so that a remembered session costs no tag
	// check: a token this service did not make is in no cache.
	if len(token) != sessionTokenLen && len(token) != legacyTokenLen {
		return Session{}, ErrNoSession
	}
	key := sha256.Sum256([]byte(token))
	now := s.now()
	if sess, ok := s.sessionCache.get(key, now); ok {
		return sess, nil
	}
	if !s.sessionTokenWorthAQuery(ctx, token, legacyRecheckTime) {
		return Session{}, ErrNoSession
	}
	read, leader := s.sessionCache.join(key, now)
	if !leader {
		select {
		case <-read.done:
		case <-ctx.Done():
			return Session{}, unavailable("reading session", ctx.Err())
		}
		if read.err == nil && !now.Before(read.sess.ExpiresAt) {
			return Session{}, ErrNoSession
		}
		if read.err == nil || errors.Is(read.err, ErrNoSession) {
			return read.sess, read.err
		}
		// The leader's read failed, maybe only because its client hung
		// up: read for this request.
		return s.Session(ctx, token)
	}
	read.sess, read.err = s.Session(ctx, token)
	// Trusted from when the read began, so that a revocation committed
	// while it ran is seen within the bound too.
	s.sessionCache.finish(key, read, now.Add(sessionCacheTTL), now)
	return read.sess, read.err
}
