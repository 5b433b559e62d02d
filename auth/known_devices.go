package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"time"
)

// Known devices. A device cookie's MAC proves only that this service issued
// it, once, for the account; it says nothing about whether the account
// still trusts that browser. So a cookie counts as a known device only if
// its MAC is valid AND the account's row for its nonce exists (table
// devices, holding the nonce's SHA-256, never the nonce). The rows are the
// per-account value that revokes cookies: a password reset or change and
// "sign out everywhere" delete them all in the transaction that changes the
// password or ends the sessions, and each account keeps at most
// Config.MaxDevices of them, forgetting the least recently used first.
//
// The MAC is checked first, so only cookies this service issued cost a
// lookup, and none of a client its network's limits are known to refuse
// (loginWithCookie): one indexed query, answered for up to deviceCacheTTL
// from an in-process cache, so that a flood carrying one cookie costs at
// most one query per second per replica. A lookup that finds no device (a
// forgotten one's cookie, of which whoever signs in to an account of his
// own again and again holds as many as he likes) for a sign-in that its
// limits then refuse is counted by the network's rules (countLookup), so
// that a flood carrying a fresh one each time is refused before it costs
// more queries than they allow. Revocations and new devices (which may
// push an old one out) on this replica empty the cache at once; another
// replica may take up to deviceCacheTTL to see them.

const (
	// deviceCacheTTL bounds how long a replica trusts a remembered answer.
	deviceCacheTTL = time.Second
	// deviceCacheMax bounds the answers remembered.
	deviceCacheMax = 10_000
)

// deviceCache remembers recent answers of knownDevice.
type deviceCache struct {
	mu sync.Mutex
	m  map[string]cachedDevice // by email NUL nonce
	// gen counts purges, so that an answer read before one is not put
	// back after it (as the session cache's generations do).
	gen uint64
}

type cachedDevice struct {
	known bool
	until time.Time
}

func (c *deviceCache) get(key string, now time.Time) (known, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !now.Before(e.until) {
		return false, false
	}
	return e.known, true
}

// generation is the count of purges so far, read before a lookup.
func (c *deviceCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put remembers the answer of a lookup begun in generation gen, unless a
// purge came since: a revocation while the store was read.
func (c *deviceCache) put(key string, known bool, gen uint64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.m == nil {
		c.m = make(map[string]cachedDevice)
	}
	if len(c.m) >= deviceCacheMax {
		for k, e := range c.m {
			if !now.Before(e.until) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= deviceCacheMax {
			// More live answers than the bound within one TTL: start over,
			// as the session cache does, rather than scan the whole map
			// on every put and remember nothing new.
			clear(c.m)
		}
	}
	c.m[key] = cachedDevice{known: known, until: now.Add(deviceCacheTTL)}
}

// purge forgets every answer: after a revocation.
func (c *deviceCache) purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	c.gen++
}

func nonceHash(nonce string) []byte {
	sum := sha256.Sum256([]byte(nonce))
	return sum[:]
}

// knownDevice reports whether nonce, from a cookie whose MAC is valid for
// email, is a known device of that account that signed in within
// Config.DeviceTTL (the cookie's lifetime, which a client that keeps it
// longer does not get around).
func (s *Service) knownDevice(ctx context.Context, email, nonce string) (bool, error) {
	known, _, err := s.lookUpDevice(ctx, email, nonce)
	return known, err
}

// lookUpDevice is knownDevice, and reports whether the answer took a query
// (looked): one the cache did not have.
func (s *Service) lookUpDevice(ctx context.Context, email, nonce string) (known, looked bool, err error) {
	key := email + "\x00" + nonce
	now := s.now()
	if known, ok := s.deviceCache.get(key, now); ok {
		return known, false, nil
	}
	gen := s.deviceCache.generation()
	known, err = s.store.KnownDevice(ctx, email, nonceHash(nonce), s.now().Add(-s.cfg.DeviceTTL))
	if err != nil {
		return false, true, s.dbDown("reading device", err)
	}
	s.deviceCache.put(key, known, gen, now)
	return known, true, nil
}

// addDevice makes nonce a known device of u, verified or not
// (DeviceStore.AddDevice), and forgets the least recently used devices
// beyond Config.MaxDevices, only while passwordHash is still the
// account's password hash and no browser was signed out everywhere since
// u was read: a sign-in that verified a password being replaced, or
// signed out everywhere, at that moment adds no device
// (ErrPasswordChanged).
func (s *Service) addDevice(ctx context.Context, u User, passwordHash, nonce string, verified bool) error {
	err := s.store.AddDevice(ctx, u.ID, passwordHash, u.SignOuts, nonceHash(nonce), s.now(), s.cfg.MaxDevices, verified)
	if errors.Is(err, ErrPasswordChanged) {
		return err
	}
	if err != nil {
		return s.dbDown("adding device", err)
	}
	// The bound may have forgotten a device this replica remembers.
	s.deviceCache.purge()
	return nil
}

// touchDevice notes that a known device signed in now, which keeps it
// among the devices the account remembers.
func (s *Service) touchDevice(ctx context.Context, nonce string) {
	if err := s.store.TouchDevice(ctx, nonceHash(nonce), s.now()); err != nil {
		s.metrics.dbErrors.Inc()
		s.log.WarnContext(ctx, "noting device sign-in", "err", err)
	}
}
