package auth

import (
	"crypto/sha256"
	"testing"
	"time"
)

// TestSessionCacheBounds: an answer is trusted until its bound and the
// session's expiry, never after; a read that began before a purge or a
// forget is not stored; the cache never holds more than its maximum.
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

	for name, revoke := range map[string]func(){"purge": c.purge, "forget": func() { c.forget(key) }} {
		gen := c.generation()
		revoke()
		c.put(key, sess, now.Add(sessionCacheTTL), gen, now)
		if _, ok := c.get(key, now); ok {
			t.Errorf("a read from before a %s was stored after it", name)
		}
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
	first, leader := c.join(key)
	if !leader {
		t.Fatal("the first lookup did not lead")
	}
	if second, leader := c.join(key); leader || second != first {
		t.Error("a concurrent lookup started a read of its own")
	}
	c.purge()
	after, leader := c.join(key)
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
	if _, leader := c.join(key); !leader {
		t.Error("a finished read was joined")
	}
}
