// Package breachedtest makes small breach corpora for tests, in both of
// the forms package breached reads: a directory of range files and a
// local range API serving them.
package breachedtest

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/breached"
)

// Corpus is a directory of range files, in the layout of the Pwned
// Passwords downloader, that a test adds breached passwords to as it
// goes. Each range also holds a suffix of no password, as real ones hold
// hundreds.
type Corpus struct {
	Dir string

	mu sync.Mutex
}

// New returns a Corpus of no password in a directory of the test's. It
// holds one range, 00000.txt, of a suffix no password is known to have:
// a directory without a range is refused as no corpus at all.
func New(t testing.TB) *Corpus {
	t.Helper()
	c := &Corpus{Dir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(c.Dir, "00000.txt"), fmt.Appendf(nil, "%035X:1\r\n", 0), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

// Add puts passwords in the corpus: lookups made after it find them.
func (c *Corpus) Add(t testing.TB, passwords ...string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range passwords {
		sum := sha1.Sum([]byte(p))
		h := strings.ToUpper(hex.EncodeToString(sum[:]))
		path := filepath.Join(c.Dir, h[:5]+".txt")
		old, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		body := string(old) + fmt.Sprintf("%035X:2\r\n%s:17\r\n", len(old)+1, h[5:])
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Checker returns a Checker reading the directory.
func (c *Corpus) Checker(t testing.TB) breached.Checker {
	t.Helper()
	ch, err := breached.Open(c.Dir, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// Serve serves the corpus as a range API does, answers padded with lines
// of count 0 when asked, until the test ends, and returns the API's base
// URL.
func (c *Corpus) Serve(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prefix, ok := strings.CutPrefix(r.URL.Path, "/range/")
		if !ok || len(prefix) != 5 || strings.ContainsAny(prefix, "./") {
			http.NotFound(w, r)
			return
		}
		c.mu.Lock()
		body, err := os.ReadFile(filepath.Join(c.Dir, prefix+".txt"))
		c.mu.Unlock()
		if err != nil && !os.IsNotExist(err) {
			http.Error(w, "unreadable", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(body)
		if r.Header.Get("Add-Padding") == "true" {
			fmt.Fprintf(w, "%035X:0\r\n", 99)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
