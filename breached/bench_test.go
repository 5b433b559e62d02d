package breached_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/breached"
)

// rangeOfSize is a range of n suffixes, the password's last, about as
// long as the public ranges (some 1,000 lines).
func rangeOfSize(n int, suffix string) string {
	var b strings.Builder
	for i := range n - 1 {
		fmt.Fprintf(&b, "%035X:%d\r\n", i*2654435761, i%50+1)
	}
	fmt.Fprintf(&b, "%s:3\r\n", suffix)
	return b.String()
}

// BenchmarkLookup measures one lookup of a breached password whose
// suffix is the last of a 1,000-line range, from a file and from a local
// range API (padded), the worst case of a scan.
func BenchmarkLookup(b *testing.B) {
	const password = "benchmark password"
	h := sha1Hex(password)
	body := rangeOfSize(1000, h[5:])
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, h[:5]+".txt"), []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, body)
		fmt.Fprint(w, strings.Repeat(fmt.Sprintf("%035X:0\r\n", 7), 100))
	}))
	defer srv.Close()
	for name, source := range map[string]string{"directory": dir, "range API": srv.URL} {
		b.Run(name, func(b *testing.B) {
			c, err := breached.Open(source, 5*time.Second, nil)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if found, err := c.Breached(b.Context(), password); err != nil || !found {
					b.Fatalf("Breached = %v, %v", found, err)
				}
			}
		})
	}
}
