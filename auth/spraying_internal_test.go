package auth

import (
	"strings"
	"sync"
	"testing"
)

// sprayKeyTable holds spraying keys as XCloak has always derived them:
// a lock on a sprayed password must outlive a change to how the key is
// computed, so these must never change.
var sprayKeyTable = []struct{ password, key string }{
	{"a", "DbMLTxbFYQZ9GVTWKi3HuQ"},
	{"password", "0LAh18htgk-mQMWEJguYJQ"},
	{"Pässwörd", "9RPfT18jkXm-QmF-x36Fow"},
	{"ｐａｓｓ", "X003FzYTmE0dMDdlhPY-ww"}, // NFKC: "pass"
	{"Ⅸ", "ze2JEt1Enre6ckoyEGdg8A"},    // NFKC: "IX"
	{"\x00\xff", "JBbGJBvbSHs7SKzR90ulzA"},
}

// TestSprayKeysUnchanged: the spraying key of each password is what it
// always was, one at a time and from many goroutines at once (keyed
// hashes reused across requests must start afresh for each).
func TestSprayKeysUnchanged(t *testing.T) {
	k := newSprayKeys([]byte("0123456789abcdef0123456789abcdef"))
	for _, c := range sprayKeyTable {
		if got := k.of(c.password); got != c.key {
			t.Errorf("of(%q) = %q, want %q", c.password, got, c.key)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				c := sprayKeyTable[(g+i)%len(sprayKeyTable)]
				if got := k.of(c.password); got != c.key {
					t.Errorf("concurrent of(%q) = %q, want %q", c.password, got, c.key)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestSprayKeyAllocations: a spraying key, computed for every sign-in
// before its limits (rejected ones included), allocates only the key it
// returns, whatever the password's length.
func TestSprayKeyAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("allocation counts under -race count what sync.Pool drops")
	}
	k := newSprayKeys([]byte("0123456789abcdef0123456789abcdef"))
	for _, p := range []string{"password", strings.Repeat("x", MaxPasswordBytes)} {
		k.of(p) // warm the pool
		if n := testing.AllocsPerRun(100, func() { k.of(p) }); n > 1 {
			t.Errorf("of(%d bytes): %v allocations, want 1", len(p), n)
		}
	}
}
