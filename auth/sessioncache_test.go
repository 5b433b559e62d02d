package auth

import (
	"crypto/sha256"
	"testing"
	"time"
)

// TestSessionCacheBounds: an answer is trusted until its bound and the
// session's expiry, never after; a read that began before a purge is not
// stored, and a forgotten session is not remembered; the cache never
// holds more than its maximum.
func TestSessionCacheBounds(t *testing.T) {
	var c sessionCache
	now := time.Now()
	key := sha256.Sum256([]byte("token"))
	sess := Session{Email: "ann@example.com", ExpiresAt: now.Add(time.Hour)}

	c.put(key, sess, now.Add(sessionCacheTTL), c.generation(), now)
	if got, ok := c.get(key, now.Add(sessionCacheTTL-time.Nanosecond)); !ok || got.Email != sess.Email {
		t.Errorf("within the bound: %v, %v", got, ok)
	}
	if _, ok := c.get(key, now.Add(sessionCacheTTL)); ok {
		t.Error("answered at the bound")
	}
	short := Session{ExpiresAt: now.Add(time.Millisecond)}
	c.put(key, short, now.Add(sessionCacheTTL), c.generation(), now)
	if _, ok := c.get(key, now.Add(time.Millisecond)); ok {
		t.Error("answered a session past its expiry")
	}

	gen := c.generation()
	c.purge()
	c.put(key, sess, now.Add(sessionCacheTTL), gen, now)
	if _, ok := c.get(key, now); ok {
		t.Error("a read from before a purge was stored after it")
	}
	c.put(key, sess, now.Add(sessionCacheTTL), c.generation(), now)
	c.forget(key)
	if _, ok := c.get(key, now); ok {
		t.Error("a forgotten session is still remembered")
	}

	for i := range sessionCacheMax + 10 {
		k := sha256.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16)})
		c.put(k, sess, now.Add(sessionCacheTTL), c.generation(), now)
		if len(c.m) > sessionCacheMax {
			t.Fatalf("%d sessions remembered, more than %d", len(c.m), sessionCacheMax)
		}
	}
}

// TestSessionCacheSharesReads: lookups that miss together wait for one
// read; one that starts after a purge does not join a read from before it.
func TestSessionCacheSharesReads(t *testing.T) {
	var c sessionCache
	now := time.Now()
	key := sha256.Sum256([]byte("token"))
	first, leader := c.join(key, now)
	if !leader {
		t.Fatal("the first lookup did not lead")
	}
	if second, leader := c.join(key, now); leader || second != first {
		t.Error("a concurrent lookup started a read of its own")
	}
	c.purge()
	after, leader := c.join(key, now)
	if !leader || after == first {
		t.Error("a lookup after a purge joined a read from before it")
	}
	first.sess = Session{Email: "ann@example.com", ExpiresAt: now.Add(time.Hour)}
	c.finish(key, first, now.Add(sessionCacheTTL), now)
	<-first.done
	if _, ok := c.get(key, now); ok {
		t.Error("a read from before a purge was stored")
	}
	after.sess = first.sess
	c.finish(key, after, now.Add(sessionCacheTTL), now)
	if _, ok := c.get(key, now); !ok {
		t.Error("the read after the purge was not stored")
	}
	if _, leader := c.join(key, now); !leader {
		t.Error("a finished read was joined")
	}
}

// TestSessionCacheForgetIsPerSession: a sign-out, which anyone can send
// with a made-up but well-formed cookie and no session, forgets that
// token alone: the reads of other sessions in flight are still shared and
// stored, so a flood of such sign-outs cannot keep every replica's cache
// empty and send each proxy question to the database.
func TestSessionCacheForgetIsPerSession(t *testing.T) {
	var c sessionCache
	now := time.Now()
	ann, made := sha256.Sum256([]byte("ann's token")), sha256.Sum256([]byte("made-up token"))
	read, leader := c.join(ann, now)
	if !leader {
		t.Fatal("the first lookup did not lead")
	}
	c.forget(made)
	if again, leader := c.join(ann, now); leader || again != read {
		t.Error("after another token's sign-out, a lookup did not share the read in flight")
	}
	read.sess = Session{Email: "ann@example.com", ExpiresAt: now.Add(time.Hour)}
	c.finish(ann, read, now.Add(sessionCacheTTL), now)
	if _, ok := c.get(ann, now); !ok {
		t.Error("after another token's sign-out, the read in flight was not stored")
	}

	// The token signed out itself is neither shared nor stored.
	read, _ = c.join(ann, now)
	c.forget(ann)
	if again, leader := c.join(ann, now); !leader || again == read {
		t.Error("a lookup after the session's sign-out joined a read from before it")
	}
	read.sess = Session{Email: "ann@example.com", ExpiresAt: now.Add(time.Hour)}
	c.finish(ann, read, now.Add(sessionCacheTTL), now)
	if _, ok := c.get(ann, now); ok {
		t.Error("a read from before the session's sign-out was stored")
	}
}
