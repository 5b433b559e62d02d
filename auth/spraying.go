package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"sync"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// Password spraying: an attacker tries one password (a common one, or one
// leaked with many accounts) on many accounts, a few tries each, so that
// no account's lockout and no network's limit sees it. XCloak counts the
// failures of each password over distinct accounts: once one has failed
// on SprayAccounts accounts within SprayWindow, it is refused for every
// account, before any database read or hashing, for the rest of the
// window.
//
// It is RuleLoginPassword's lockout: the rule is keyed by the password's
// spraying key (KeyPassword), and a failed sign-in counts towards its lock
// with the account as the attempt, so that smart lockout's dedupe of
// repeated attempts (ratelimit.Store.Fail) counts distinct accounts, and
// a user retyping a wrong password counts once. The lock refuses in the
// same decision as every other rule. It is no account lockout: it is not
// in the lockout log, the dashboard's locked accounts or the unlock links.
//
// The key is an HMAC under a key derived from the service secret, so
// neither the password nor a plain hash of it, which a dictionary would
// reverse, is ever stored. Unlike a lockout's attempt fingerprints it is
// not keyed by the account: it must be the same for every account.

// DefaultSprayAccounts and DefaultSprayWindow are the spraying defaults:
// ten accounts failing with one password within the hour is far more
// than the users of one site share a wrong password by chance.
const (
	DefaultSprayAccounts = 10
	DefaultSprayWindow   = time.Hour
)

// sprayKeys derives the spraying keys of passwords.
type sprayKeys struct {
	key []byte
	// macs holds *sprayMAC: keyed hashes reused from one sign-in to the
	// next, since every sign-in, rejected ones included, computes a key.
	macs *sync.Pool
}

// sprayMAC is one reusable keyed hash, with room for its input and sum.
type sprayMAC struct {
	h   hash.Hash
	in  []byte
	sum [sha256.Size]byte
}

func newSprayKeys(secret []byte) sprayKeys {
	return sprayKeys{key: deriveKey(secret, "password-spraying"), macs: new(sync.Pool)}
}

// of returns the spraying key of password: 128 bits of HMAC-SHA256 over
// the normalised password, so that the forms of a password that sign in
// alike are sprayed alike, in unpadded base64url.
func (k sprayKeys) of(password string) string {
	m, _ := k.macs.Get().(*sprayMAC)
	if m == nil {
		m = &sprayMAC{h: hmac.New(sha256.New, k.key)}
		// Its first reset, while it holds no input, saves the keyed
		// state that every later one restores: a restore overwrites the
		// block of input kept in the hash, which a plain reset leaves.
		m.h.Reset()
	}
	m.in = append(m.in[:0], normalisePassword(password)...)
	m.h.Write(m.in)
	var key [22]byte
	base64.RawURLEncoding.Encode(key[:], m.h.Sum(m.sum[:0])[:16])
	// No password left behind in the pool: not in the copy of the input,
	// nor in the hash, which keeps the tail of its input that fills no
	// block (all of a password under 64 bytes) until it is reset.
	clear(m.in)
	m.h.Reset()
	k.macs.Put(m)
	return string(key[:])
}

// sprayPolicy is RuleLoginPassword's lockout: the password is locked for
// the window once it has failed on accounts distinct accounts within the
// window. Every lock lasts the window: there is nothing to escalate.
func sprayPolicy(accounts int, window time.Duration) ratelimit.LockoutPolicy {
	return ratelimit.LockoutPolicy{Threshold: accounts, Duration: window, MaxDuration: window, Memory: window}
}

// checkSpraying checks the spraying settings: at least one account, at
// most as many as a lockout remembers distinct attempts of (beyond that
// the accounts could no longer be told apart), and a window a lock can
// last.
func checkSpraying(accounts int, window time.Duration) error {
	if accounts < 1 || accounts > ratelimit.MaxRememberedAttempts {
		return fmt.Errorf("spraying accounts %d, want 1 to %d", accounts, ratelimit.MaxRememberedAttempts)
	}
	if window < time.Second || window > ratelimit.MaxWindow {
		return fmt.Errorf("spraying window %s, want 1s to %s", window, ratelimit.MaxWindow)
	}
	return nil
}

// sprayFailed counts a failed sign-in of email towards the lock of the
// password tried, by its spraying key. The lock's one report of locking
// is a security event and a warning; neither names the password.
func (s *Service) sprayFailed(ctx context.Context, email, source, sprayKey string) error {
	f, err := s.limits.Fail(ctx, RuleLoginPassword, sprayKey, email)
	if err != nil {
		return unavailable("counting failure", err)
	}
	if f.LockedNow {
		until := s.now().Add(f.LockedFor).UTC().Format(time.RFC3339)
		s.log.WarnContext(ctx, "password spraying: a password failed on many accounts is refused",
			"accounts", f.Failures, "until", until, "source", source)
		s.record(Event{Kind: EventPasswordSprayed, Source: source, Detail: map[string]string{
			"accounts": fmt.Sprint(f.Failures), "until": until}})
	}
	return nil
}
