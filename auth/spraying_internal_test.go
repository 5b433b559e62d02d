package auth

import (
	"bytes"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/xcloak/xcloak/internal/race"
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
	if race.Enabled {
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

// TestSprayKeysLeaveNoPasswordInThePool: a keyed hash back in the pool
// holds nothing of the password it was last given. A hash keeps the tail
// of its input that fills no block, all of a short password, until it is
// reset; the pool outlives the request, so a heap dump or core file would
// show the last passwords tried.
func TestSprayKeysLeaveNoPasswordInThePool(t *testing.T) {
	k := newSprayKeys([]byte("0123456789abcdef0123456789abcdef"))
	// The first in a new hash, the second in one reused.
	for _, p := range []string{"Tr0ub4dor&3-first", "Tr0ub4dor&3-reused"} {
		var m *sprayMAC
		for range 100 { // a Put under -race is dropped now and then
			k.of(p)
			if m, _ = k.macs.Get().(*sprayMAC); m != nil {
				break
			}
		}
		if m == nil {
			t.Fatal("no keyed hash came back from the pool")
		}
		if holdsBytes(reflect.ValueOf(m), []byte(p), map[uintptr]bool{}) {
			t.Errorf("the pooled keyed hash holds the password %q", p)
		}
		k.macs.Put(m)
	}
}

// holdsBytes reports whether the memory reachable from v, through
// pointers, interfaces, slices and struct fields, holds want.
func holdsBytes(v reflect.Value, want []byte, seen map[uintptr]bool) bool {
	switch v.Kind() {
	case reflect.Interface:
		return !v.IsNil() && holdsBytes(v.Elem(), want, seen)
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return false
		}
		seen[v.Pointer()] = true
		e := v.Elem()
		raw := unsafe.Slice((*byte)(v.UnsafePointer()), e.Type().Size())
		return bytes.Contains(raw, want) || holdsBytes(e, want, seen)
	case reflect.Slice:
		if v.IsNil() || v.Len() == 0 {
			return false
		}
		raw := unsafe.Slice((*byte)(v.UnsafePointer()), uintptr(v.Cap())*v.Type().Elem().Size())
		if bytes.Contains(raw, want) {
			return true
		}
		for i := range v.Len() {
			if holdsBytes(v.Index(i), want, seen) {
				return true
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if holdsBytes(v.Field(i), want, seen) {
				return true
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			if holdsBytes(v.Index(i), want, seen) {
				return true
			}
		}
	}
	return false
}
