package auth

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// countHashes makes every key h derives from now on count into the
// returned counter.
func countHashes(h *Hasher) *atomic.Int64 {
	var n atomic.Int64
	h.derived = func() { n.Add(1) }
	return &n
}

// TestVerifyWorkIsTheSameRightOrWrong: how many hashes Verify computes
// depends on the password typed alone, never on whether it is the
// account's, nor on the account existing. A right password typed in a
// form NFKC changes (one full-width letter) once cost one hash where a
// wrong one cost two: the time of a held sign-in, whose answer is the
// same either way, told which passwords of a list were right.
func TestVerifyWorkIsTheSameRightOrWrong(t *testing.T) {
	ctx := context.Background()
	h, err := NewHasher(Params{Memory: 128, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	n := countHashes(h)
	stored := func(password string) string {
		e, err := h.hash([]byte(password))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// NFKC leaves the first alone and changes the others (a full-width
	// letter, a combining accent); a "!" after any of them changes
	// nothing of that.
	for _, typed := range []string{"correct horse 12", "ｃorrect horse 12", "Pa\u0301ssword-42"} {
		// As Hash stores it, and as hashes made before passwords were
		// normalised did: the password as typed.
		normalised, asTyped := stored(normalisePassword(typed)), stored(typed)
		work := map[string]int64{}
		for _, c := range []struct {
			what, encoded, password string
			right                   bool
		}{
			{"the right password", normalised, typed, true},
			{"the right password, stored as typed", asTyped, typed, true},
			{"a wrong password", normalised, typed + "!", false},
			{"a wrong password, stored as typed", asTyped, typed + "!", false},
		} {
			n.Store(0)
			ok, _, err := h.Verify(ctx, c.encoded, c.password)
			if err != nil || ok != c.right {
				t.Fatalf("%q, %s: Verify = %v, %v", typed, c.what, ok, err)
			}
			work[c.what] = n.Load()
		}
		n.Store(0)
		if err := h.VerifyUnknown(ctx, typed); err != nil {
			t.Fatal(err)
		}
		unknown := n.Load()
		for what, got := range work {
			if got != unknown {
				t.Errorf("%q: %s costs %d hashes, an unknown account %d", typed, what, got, unknown)
			}
		}
	}
}

// TestDefaultHashConcurrency: by default a Hasher computes one hash fewer
// than the cores at once, at least one, beside the returning browsers'
// reserved slot.
func TestDefaultHashConcurrency(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []struct{ procs, want int }{{1, 1}, {2, 1}, {4, 3}} {
		runtime.GOMAXPROCS(c.procs)
		if got := DefaultHashConcurrency(); got != c.want {
			t.Errorf("GOMAXPROCS %d: DefaultHashConcurrency %d, want %d", c.procs, got, c.want)
		}
		if h := newHasher(t, fast, 0, time.Second); cap(h.slots) != c.want || cap(h.reserved) != 1 {
			t.Errorf("GOMAXPROCS %d: %d slots and %d reserved, want %d and 1", c.procs, cap(h.slots), cap(h.reserved), c.want)
		}
	}
}
