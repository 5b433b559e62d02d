package ratelimit_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// The conformance cases of attempts in flight (BeginAttempt, EndAttempt),
// run on every store by TestStoreConformance.

// beginAtOnce begins n attempts against id under name, all released at
// once, and returns what each got.
func beginAtOnce(t *testing.T, s storeUnderTest, name, id string, n int, ttl time.Duration) []ratelimit.Begun {
	out, errs := atOnce(n, func() (ratelimit.Begun, error) {
		return s.BeginAttempt(t.Context(), name, id, "", ttl)
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// begun returns the attempts of out that were allowed, and checks that
// each refused one was refused as ones in flight are: not locked, with a
// wait no longer than ttl.
func begun(t *testing.T, out []ratelimit.Begun, ttl time.Duration) []ratelimit.Begun {
	t.Helper()
	var allowed []ratelimit.Begun
	tokens := map[string]bool{}
	for _, b := range out {
		if !b.Allowed {
			if b.Locked || b.Token != "" || b.RetryAfter <= 0 || b.RetryAfter > ttl {
				t.Fatalf("refused attempt %+v; want no token, not locked, retry-after in (0, %v]", b, ttl)
			}
			continue
		}
		if b.Token == "" || tokens[b.Token] || b.RetryAfter != 0 || b.Locked {
			t.Fatalf("allowed attempt %+v; want a token of its own, no wait", b)
		}
		tokens[b.Token] = true
		allowed = append(allowed, b)
	}
	return allowed
}

func beginOne(t *testing.T, s storeUnderTest, name, id string, ttl time.Duration) ratelimit.Begun {
	t.Helper()
	return beginWith(t, s, name, id, "", ttl)
}

// beginWith begins an attempt of attempt (a password's fingerprint)
// against id under name.
func beginWith(t *testing.T, s storeUnderTest, name, id, attempt string, ttl time.Duration) ratelimit.Begun {
	t.Helper()
	b, err := s.BeginAttempt(t.Context(), name, id, attempt, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func endOne(t *testing.T, s storeUnderTest, name, id, token string) {
	t.Helper()
	if err := s.EndAttempt(t.Context(), name, id, token); err != nil {
		t.Fatal(err)
	}
}

// caseAttemptsInFlight: however many attempts begin at once, the failures
// counted and the attempts in flight never pass the threshold together, so
// guesses sent at once cannot be checked past the lock; an attempt ended
// frees its place; a lock refuses as locked.
func caseAttemptsInFlight(t *testing.T, s storeUnderTest) {
	const name, id = "login_account", "dave@example.com"
	p := suitePolicies[name]
	ttl := time.Minute
	for trial := range trials {
		id := fmt.Sprintf("%d-%s", trial, id)
		in := begun(t, beginAtOnce(t, s, name, id, 40, ttl), ttl)
		if len(in) != p.Threshold {
			t.Fatalf("40 attempts begun at once: %d allowed; want the threshold, %d", len(in), p.Threshold)
		}
		// A failure counted, its attempt ended: 1 failure and 2 in flight.
		failWith(t, s, name, id, "guess 1")
		endOne(t, s, name, id, in[0].Token)
		if b := beginOne(t, s, name, id, ttl); b.Allowed {
			t.Fatalf("1 failure and 2 attempts in flight, threshold %d: %+v; want refused", p.Threshold, b)
		}
		// One ended without a failure (a success): a place frees.
		endOne(t, s, name, id, in[1].Token)
		next := beginOne(t, s, name, id, ttl)
		if !next.Allowed {
			t.Fatalf("1 failure and 1 attempt in flight: %+v; want allowed", next)
		}
		// Ending an attempt again, or one never begun, changes nothing.
		endOne(t, s, name, id, in[1].Token)
		endOne(t, s, name, id, "no such attempt")
		if b := beginOne(t, s, name, id, ttl); b.Allowed {
			t.Fatalf("1 failure and 2 attempts in flight after ending one twice: %+v; want refused", b)
		}
		// The other rule's lockout is its own.
		if b := beginOne(t, s, "login_device", id, ttl); !b.Allowed {
			t.Fatalf("login_device beside a full login_account: %+v; want allowed", b)
		}
		// The two left fail: the second locks.
		failWith(t, s, name, id, "guess 2")
		endOne(t, s, name, id, in[2].Token)
		if f := failWith(t, s, name, id, "guess 3"); !f.LockedNow {
			t.Fatalf("the threshold's failure: %+v; want it to lock", f)
		}
		endOne(t, s, name, id, next.Token)
		// Redis counts a lock's time left in whole milliseconds, and one
		// more keeps the wait from being early.
		if b := beginOne(t, s, name, id, ttl); b.Allowed || !b.Locked || b.RetryAfter <= 0 || b.RetryAfter > p.LockFor(1)+time.Millisecond {
			t.Fatalf("while locked: %+v; want refused as locked, retry-after in (0, %v]", b, p.LockFor(1)+time.Millisecond)
		}
		// Cleared (a sign-in, an unlock): nothing counted, nothing in flight.
		if _, err := s.Clear(t.Context(), name, id); err != nil {
			t.Fatal(err)
		}
		if got := begun(t, beginAtOnce(t, s, name, id, 10, ttl), ttl); len(got) != p.Threshold {
			t.Fatalf("after Clear, 10 at once: %d allowed; want %d", len(got), p.Threshold)
		}
	}
}

// caseAttemptsInFlightExpire: an attempt never ended counts for its ttl
// and no longer, and its keys go with it.
func caseAttemptsInFlightExpire(t *testing.T, s storeUnderTest) {
	const name = "login_account"
	p := suitePolicies[name]
	ttl := time.Second
	againIfLate(t, func(attempt int) bool {
		id := fmt.Sprintf("erin-%d@example.com", attempt)
		start := time.Now()
		in := begun(t, beginAtOnce(t, s, name, id, p.Threshold+1, ttl), ttl)
		// Every attempt began before now, by the store's clock too.
		began := time.Now()
		if began.Sub(start) >= ttl {
			// The first may have run out before the last began.
			return true
		}
		if len(in) != p.Threshold {
			t.Fatalf("%d attempts begun at once: %d allowed; want %d", p.Threshold+1, len(in), p.Threshold)
		}
		b := beginOne(t, s, name, id, ttl)
		if time.Since(start) >= ttl {
			return true
		}
		if b.Allowed {
			t.Fatalf("past the threshold within the ttl: %+v; want refused", b)
		}
		if s.expiries != nil {
			for k, left := range s.expiries(t) {
				if left <= 0 || left > ttl {
					t.Errorf("key %q has %v left, want in (0, %v]", k, left, ttl)
				}
			}
		}
		time.Sleep(time.Until(began.Add(ttl + 10*time.Millisecond)))
		if b := beginOne(t, s, name, id, ttl); !b.Allowed {
			t.Fatalf("once the attempts' ttl has passed: %+v; want allowed", b)
		}
		return false
	})
}

// caseAttemptsInFlightMixedTTL: an attempt begun with a shorter ttl than
// one in flight before it stops counting by its own ttl, and never cuts
// the other's short.
func caseAttemptsInFlightMixedTTL(t *testing.T, s storeUnderTest) {
	const name, id = "login_account", "gail@example.com"
	p := suitePolicies[name]
	long, short := time.Minute, 50*time.Millisecond
	if b := beginOne(t, s, name, id, long); !b.Allowed {
		t.Fatalf("the first attempt: %+v; want allowed", b)
	}
	if b := beginOne(t, s, name, id, short); !b.Allowed {
		t.Fatalf("the second attempt: %+v; want allowed", b)
	}
	// Past the short ttl, by the store's clock too; the long one counts
	// for a minute yet.
	time.Sleep(4 * short)
	if got := begun(t, beginAtOnce(t, s, name, id, p.Threshold, long), long); len(got) != p.Threshold-1 {
		t.Fatalf("one attempt in flight for a minute, %d begun at once: %d allowed; want %d", p.Threshold, len(got), p.Threshold-1)
	}
}

// caseAttemptsBadInput: what no lockout can take is an error.
func caseAttemptsBadInput(t *testing.T, s storeUnderTest) {
	for _, name := range []string{"login_ip", "Bad Name", ""} {
		if _, err := s.BeginAttempt(t.Context(), name, "x", "", time.Second); !errors.Is(err, ratelimit.ErrNoLockouts) {
			t.Errorf("BeginAttempt under %q: %v; want ErrNoLockouts", name, err)
		}
		if err := s.EndAttempt(t.Context(), name, "x", "token"); !errors.Is(err, ratelimit.ErrNoLockouts) {
			t.Errorf("EndAttempt under %q: %v; want ErrNoLockouts", name, err)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond, ratelimit.MaxWindow + time.Second} {
		if b, err := s.BeginAttempt(t.Context(), "login_account", "x", "", ttl); err == nil {
			t.Errorf("BeginAttempt for %v: %+v; want an error", ttl, b)
		}
	}
	// Identities and tokens are any bytes.
	for _, id := range []string{"", "{", "}x{", "\x00", "\xff\xfe", strings.Repeat("long", 1024)} {
		b, err := s.BeginAttempt(t.Context(), "login_account", id, id, time.Second)
		if err != nil || !b.Allowed {
			t.Errorf("identity %q: %+v, %v; want allowed", id, b, err)
		}
		if err := s.EndAttempt(t.Context(), "login_account", id, id); err != nil {
			t.Errorf("ending %q: %v", id, err)
		}
	}
}

// caseRepeatedAttemptTakesNoPlace: an attempt the identity already failed
// with, which Fail would not count again (smart lockout), goes ahead
// without a place, even where the places are taken, and holds none: a
// password retyped, by its owner or by an attacker repeating a refused
// guess, can neither be refused by the places nor keep others out.
func caseRepeatedAttemptTakesNoPlace(t *testing.T, s storeUnderTest) {
	const name, id = "login_account", "ida@example.com"
	p := suitePolicies[name]
	ttl := time.Minute
	failWith(t, s, name, id, "an old password")
	in := begun(t, beginAtOnce(t, s, name, id, p.Threshold, ttl), ttl)
	if len(in) != p.Threshold-1 {
		t.Fatalf("1 failure, %d attempts at once: %d allowed; want %d", p.Threshold, len(in), p.Threshold-1)
	}
	for range 3 {
		if b := beginWith(t, s, name, id, "an old password", ttl); !b.Allowed || b.Token != "" {
			t.Fatalf("the failed attempt again, the places taken: %+v; want allowed without a place", b)
		}
	}
	if b := beginWith(t, s, name, id, "a new guess", ttl); b.Allowed {
		t.Fatalf("a new attempt, the places taken: %+v; want refused", b)
	}
	// Ending the empty token changes nothing.
	endOne(t, s, name, id, "")
	if b := beginWith(t, s, name, id, "a new guess", ttl); b.Allowed {
		t.Fatalf("a new attempt after ending the empty token: %+v; want refused", b)
	}
	endOne(t, s, name, id, in[0].Token)
	if b := beginWith(t, s, name, id, "a new guess", ttl); !b.Allowed || b.Token == "" {
		t.Fatalf("a new attempt once a place is given back: %+v; want allowed with a place", b)
	}
}
