//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package breached_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xcloak/xcloak/breached"
)

// TestLookupLeavesNoReadBehind: a range file that never gives its bytes,
// a FIFO (no one has it open to write, so that opening it would wait, or
// a writer that never writes, so that reading it would), fails the lookup
// within its bound, and nothing the lookup started goes on after it.
func TestLookupLeavesNoReadBehind(t *testing.T) {
	p := breachedPasswords[0]
	for _, writer := range []bool{false, true} {
		name := "no writer"
		if writer {
			name = "a writer that never writes"
		}
		t.Run(name, func(t *testing.T) {
			d := newCorpus(t).writeDir(t, ".txt", "\n")
			fifo := filepath.Join(d, sha1Hex(p)[:5]+".txt")
			if err := os.Remove(fifo); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Skipf("no FIFO here: %v", err)
			}
			if writer {
				// O_RDWR opens a FIFO at once, and holds it open for writing.
				w, err := os.OpenFile(fifo, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { w.Close() })
			} else {
				// Should a read be left waiting to open it, a writer coming
				// and going lets it go, so that the test ends either way.
				t.Cleanup(func() {
					if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
						w.Close()
					}
				})
			}
			checker, err := breached.Open(d, 100*time.Millisecond, nil)
			if err != nil {
				t.Fatal(err)
			}
			const lookups = 20
			for range lookups {
				start := time.Now()
				got, err := checker.Breached(t.Context(), p)
				if err == nil || got {
					t.Fatalf("Breached = %v, %v; want false and an error", got, err)
				}
				// A hung read never ends: five seconds tells it from a
				// bound of 100ms that a loaded machine kept late.
				if took := time.Since(start); took > 5*time.Second {
					t.Fatalf("a lookup took %v, past its bound of 100ms", took)
				}
				if errors.Is(err, breached.ErrNotARange) {
					t.Fatalf("Breached: %v; a FIFO is no range file, but not a range of another form either", err)
				}
			}
			// What a lookup started may take a moment to end, longer
			// under load; a read left behind never does.
			deadline := time.Now().Add(10 * time.Second)
			for len(inPackage()) > 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if left := inPackage(); len(left) > 0 {
				t.Errorf("%d goroutines left behind by %d lookups, the first:\n%s", len(left), lookups, left[0])
			}
		})
	}
}

// inPackage returns the stacks of the goroutines running code of package
// breached: none, between lookups. Those of other tests, or of this one's
// test package, do not count, so that a goroutine another subtest left
// ending meanwhile can neither hide one nor be taken for one.
func inPackage() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/xcloak/xcloak/breached.") {
			out = append(out, g)
		}
	}
	return out
}
