package breached_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/breached"
	"github.com/xcloak/xcloak/internal/testenv"
)

// corpus is a small breach corpus made up for the tests: the ranges of
// the breached passwords' prefixes, each with other suffixes around the
// breached one, as real ranges hold hundreds.
type corpus map[string][]string // lines by prefix

func sha1Hex(p string) string {
	sum := sha1.Sum([]byte(p))
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

var (
	breachedPasswords = []string{"password1", "correct horse battery staple", "Tr0ub4dor&3", "pässwörd-ünicode"}
	safePasswords     = []string{"never-leaked-7f3a9c", "another one nobody used", "password2-not-in-corpus"}
)

func newCorpus(t *testing.T) corpus {
	t.Helper()
	c := corpus{}
	for i, p := range breachedPasswords {
		h := sha1Hex(p)
		prefix, suffix := h[:5], h[5:]
		// Neighbours: other suffixes under the same prefix, and a suffix
		// differing from the breached one in its last digit only.
		c[prefix] = append(c[prefix],
			fmt.Sprintf("%035X:%d", i*7919+1, 3),
			suffix[:34]+flip(suffix[34])+":12",
			fmt.Sprintf("%s:%d", suffix, 100+i),
			fmt.Sprintf("%035X:%d", i*104729+5, 1))
	}
	// The prefix of a safe password holds other suffixes only.
	h := sha1Hex(safePasswords[0])
	c[h[:5]] = append(c[h[:5]], fmt.Sprintf("%035X:9", 42))
	return c
}

func flip(b byte) string {
	if b == '0' {
		return "1"
	}
	return "0"
}

// writeDir writes the corpus as the downloader does: one file per
// prefix, with .txt or without, CRLF or LF line ends.
func (c corpus) writeDir(t *testing.T, ext, eol string) string {
	t.Helper()
	d := t.TempDir()
	for prefix, lines := range c {
		body := strings.Join(lines, eol) + eol
		if err := os.WriteFile(filepath.Join(d, prefix+ext), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// server serves the corpus as the range API does, padded with lines of
// count 0 when asked, and records the paths it was asked for.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	paths    []string
	padded   []bool
	rawQuery []string
}

// paddingOf is the padding of a range: a suffix whose line would say
// breached if its count were not 0.
func paddingOf(prefix string) string { return sha1Hex("padding-of-" + prefix)[5:] }

func (c corpus) serve(t *testing.T) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.Path)
		s.padded = append(s.padded, r.Header.Get("Add-Padding") == "true")
		s.rawQuery = append(s.rawQuery, r.URL.RawQuery)
		s.mu.Unlock()
		prefix, ok := strings.CutPrefix(r.URL.Path, "/mirror/range/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		lines := slices.Clone(c[prefix])
		if r.Header.Get("Add-Padding") == "true" {
			lines = append(lines, paddingOf(prefix)+":0", fmt.Sprintf("%035X:0", 77))
		}
		fmt.Fprint(w, strings.Join(lines, "\r\n"))
	}))
	t.Cleanup(s.Close)
	return s
}

func open(t *testing.T, source string) breached.Checker {
	t.Helper()
	c, err := breached.Open(source, 5*time.Second, nil)
	if err != nil {
		t.Fatalf("Open(%q): %v", source, err)
	}
	return c
}

func TestFindsTheBreachedOnly(t *testing.T) {
	c := newCorpus(t)
	srv := c.serve(t)
	sources := map[string]string{
		"directory, .txt, CRLF":         c.writeDir(t, ".txt", "\r\n"),
		"directory, no extension, LF":   c.writeDir(t, "", "\n"),
		"range API":                     srv.URL + "/mirror",
		"range API, base with trailing": srv.URL + "/mirror/",
	}
	for name, source := range sources {
		t.Run(name, func(t *testing.T) {
			checker := open(t, source)
			for _, p := range breachedPasswords {
				if got, err := checker.Breached(t.Context(), p); err != nil || !got {
					t.Errorf("Breached(%q) = %v, %v; want true", p, got, err)
				}
			}
			for _, p := range safePasswords {
				if got, err := checker.Breached(t.Context(), p); err != nil || got {
					t.Errorf("Breached(%q) = %v, %v; want false", p, got, err)
				}
			}
		})
	}
}

func TestAPIAsksForThePrefixOnlyWithPadding(t *testing.T) {
	c := newCorpus(t)
	srv := c.serve(t)
	checker := open(t, srv.URL+"/mirror")
	all := append(slices.Clone(breachedPasswords), safePasswords...)
	for _, p := range all {
		if _, err := checker.Breached(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.paths) != len(all) {
		t.Fatalf("%d requests, want %d", len(srv.paths), len(all))
	}
	path := regexp.MustCompile(`^/mirror/range/[0-9A-F]{5}$`)
	for i, p := range all {
		if want := "/mirror/range/" + sha1Hex(p)[:5]; srv.paths[i] != want {
			t.Errorf("request %d: path %q, want %q", i, srv.paths[i], want)
		}
		if !path.MatchString(srv.paths[i]) || srv.rawQuery[i] != "" {
			t.Errorf("request %d: %q?%q sends more than a 5-digit prefix", i, srv.paths[i], srv.rawQuery[i])
		}
		if !srv.padded[i] {
			t.Errorf("request %d: no Add-Padding: true", i)
		}
	}
}

// TestAPIFollowsNoRedirectWhateverTheClient: a client given to Open keeps
// its transport, but a redirect is a failed lookup with it too, as with
// the client of Open's own: the prefix goes to the URL the operator chose
// alone.
func TestAPIFollowsNoRedirectWhateverTheClient(t *testing.T) {
	var asked sync.Mutex
	var elsewhere []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Lock()
		elsewhere = append(elsewhere, r.URL.Path)
		asked.Unlock()
		fmt.Fprintf(w, "%035X:1\r\n", 1)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	}))
	defer srv.Close()
	checker, err := breached.Open(srv.URL, time.Second, &http.Client{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := checker.Breached(t.Context(), breachedPasswords[0]); err == nil || got {
		t.Errorf("Breached = %v, %v; want false and an error", got, err)
	}
	asked.Lock()
	defer asked.Unlock()
	if len(elsewhere) != 0 {
		t.Errorf("the redirect was followed: %q asked elsewhere", elsewhere)
	}
}

// A padding line names a suffix with count 0: it is no breach, though the
// suffix matches.
func TestPaddingIsNoBreach(t *testing.T) {
	// A password whose suffix only a padding line holds: make the padding
	// of its prefix be its own suffix.
	p := safePasswords[1]
	h := sha1Hex(p)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s:0\r\n%035X:4\r\n", h[5:], 1)
	}))
	defer srv.Close()
	if got, err := open(t, srv.URL).Breached(t.Context(), p); err != nil || got {
		t.Errorf("Breached = %v, %v; want false for a suffix on a padding line", got, err)
	}
}

func TestFailures(t *testing.T) {
	c := newCorpus(t)
	p := breachedPasswords[0]
	prefix := sha1Hex(p)[:5]
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	handlers := map[string]http.HandlerFunc{
		"server error": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "down", http.StatusInternalServerError)
		},
		"redirect": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://elsewhere.example/range/"+prefix, http.StatusFound)
		},
		"no answer in time": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		},
		"an upgrade, then silence": testenv.SilentUpgrade(t),
		// A mirror that answers every path with its home page, a captive
		// portal, a proxy's error page sent with 200.
		"a page, not a range": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "<!DOCTYPE html>\n<html><head><title>Welcome</title></head>\n<body>It works!</body></html>\n")
		},
		// No real range is empty, padded or not.
		"empty range": func(w http.ResponseWriter, r *http.Request) {},
		// Lines of another length: the NTLM ranges, 27 hex digits after a
		// 5-digit prefix.
		"lines of another form": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%027X:3\r\n%027X:1\r\n", 1, 2)
		},
		"a count that is no number": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%035X:3\r\n%035X:many\r\n", 1, 2)
		},
		// The range is right, but what comes before it is not bounded by
		// the range's bound: headers of megabytes on every lookup.
		"headers past the bound": func(w http.ResponseWriter, r *http.Request) {
			for i := range 32 {
				w.Header().Set(fmt.Sprintf("X-Filler-%d", i), strings.Repeat("x", 64<<10))
			}
			fmt.Fprintf(w, "%s:1\r\n", sha1Hex(p)[5:])
		},
		"range past the bound": func(w http.ResponseWriter, r *http.Request) {
			line := fmt.Sprintf("%035X:1\r\n", 5)
			for range (1 << 20) / len(line) {
				fmt.Fprint(w, line)
			}
			fmt.Fprintf(w, "%s:1\r\n", sha1Hex(p)[5:])
		},
	}
	for name, h := range handlers {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			// The bounds are what the cases past them test, not the clock:
			// a loaded machine may take longer than 200ms to send a
			// megabyte, which would end the lookup for another cause.
			timeout := 200 * time.Millisecond
			if strings.HasSuffix(name, "past the bound") {
				timeout = 10 * time.Second
			}
			checker, err := breached.Open(srv.URL, timeout, nil)
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			got, err := checker.Breached(t.Context(), p)
			if err == nil || got {
				t.Fatalf("Breached = %v, %v; want false and an error", got, err)
			}
			if took := time.Since(began); took > timeout+2*time.Second {
				t.Errorf("the lookup took %v, with a timeout of %v", took, timeout)
			}
			if strings.HasPrefix(name, "a page") || strings.HasPrefix(name, "empty") || strings.Contains(name, "form") || strings.Contains(name, "count") {
				if !errors.Is(err, breached.ErrNotARange) {
					t.Errorf("error %q is no ErrNotARange", err)
				}
			}
			// Cut at the bound mid-line, the range is too large, not one
			// of a malformed line.
			if strings.HasPrefix(name, "range past") && !errors.Is(err, breached.ErrRangeTooLarge) {
				t.Errorf("error %q is no ErrRangeTooLarge", err)
			}
			for _, secret := range []string{p, sha1Hex(p), prefix} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q quotes the password, its hash or its prefix", err)
				}
			}
		})
	}
	t.Run("unreadable range file", func(t *testing.T) {
		d := c.writeDir(t, ".txt", "\n")
		// A directory where the range file should be cannot be read as one.
		if err := os.Remove(filepath.Join(d, prefix+".txt")); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(d, prefix+".txt"), 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := open(t, d).Breached(t.Context(), p)
		if err == nil || got {
			t.Fatalf("Breached = %v, %v; want false and an error", got, err)
		}
		if strings.Contains(err.Error(), prefix) {
			t.Errorf("error %q quotes the prefix", err)
		}
	})
	for name, body := range map[string]string{
		"empty range file":       "",
		"range file of a page":   "<html><body>Not Found</body></html>\n",
		"range file of one line": "0123456789\n",
	} {
		t.Run(name, func(t *testing.T) {
			// Broken after Open, which reads one range itself.
			d := c.writeDir(t, ".txt", "\n")
			checker := open(t, d)
			if err := os.WriteFile(filepath.Join(d, prefix+".txt"), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := checker.Breached(t.Context(), p)
			if !errors.Is(err, breached.ErrNotARange) || got {
				t.Fatalf("Breached = %v, %v; want false, ErrNotARange", got, err)
			}
			if strings.Contains(err.Error(), prefix) {
				t.Errorf("error %q quotes the prefix", err)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		got, err := open(t, c.writeDir(t, ".txt", "\n")).Breached(ctx, p)
		if !errors.Is(err, context.Canceled) || got {
			t.Errorf("Breached = %v, %v; want false, context.Canceled", got, err)
		}
	})
}

// TestAnswerCutShortIsNoMalformedRange: a range API that runs out of time
// (or whose connection breaks) in the middle of a line fails the lookup
// with that cause, not with the half line read as one that is not a
// range, which would send the operator to check the URL.
func TestAnswerCutShortIsNoMalformedRange(t *testing.T) {
	p := breachedPasswords[0]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := sha1Hex(p)[5:] // a suffix, and never its colon and count
		for i := 0; ; i = (i + 1) % len(line) {
			if _, err := fmt.Fprint(w, line[i:i+1]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(10 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	}))
	defer srv.Close()
	checker, err := breached.Open(srv.URL, 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := checker.Breached(t.Context(), p)
	if got || err == nil {
		t.Fatalf("Breached = %v, %v; want false and an error", got, err)
	}
	if errors.Is(err, breached.ErrNotARange) {
		t.Errorf("error %q says the answer is no range; it ran out of time", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q is no context.DeadlineExceeded", err)
	}
}

// dirOf makes a directory holding files of the given names and contents.
func dirOf(t *testing.T, files map[string]string) string {
	t.Helper()
	d := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// TestOpenRefusesAnUnusableDirectory: a directory that holds no range a
// lookup would read, or whose range is no range, would answer "not
// breached" for every password: Open refuses it and says why.
func TestOpenRefusesAnUnusableDirectory(t *testing.T) {
	rangeLine := fmt.Sprintf("%035X:4\r\n", 1)
	for _, tt := range []struct {
		name    string
		files   map[string]string
		wantErr string
	}{
		{"empty", nil, "holds no range files"},
		{"other files only", map[string]string{"README.md": rangeLine, "ABCDE.txt.gz": rangeLine, "ABCDEF.txt": rangeLine}, "holds no range files"},
		// Lookups open upper-case names only.
		{"lower-case names", map[string]string{"abcde.txt": rangeLine, "0000f": rangeLine}, "holds no range files"},
		{"a page for a range", map[string]string{"00000.txt": "<html><body>Not Found</body></html>\n"}, "is not a range"},
		{"an empty range", map[string]string{"00000": ""}, "is not a range"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := dirOf(t, tt.files)
			c, err := breached.Open(d, 0, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Open = %v, %v; want an error saying %q", c, err, tt.wantErr)
			}
		})
	}
	if _, err := breached.Open(dirOf(t, map[string]string{"README.md": "x", "00000.txt": rangeLine}), 0, nil); err != nil {
		t.Errorf("Open of a directory with one range file: %v", err)
	}
}

func TestOpen(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := breached.Open("", 0, nil); c != nil || err != nil {
		t.Errorf("Open(\"\") = %v, %v; want nil, nil (off)", c, err)
	}
	for _, bad := range []string{
		t.TempDir(),
		filepath.Join(t.TempDir(), "missing"),
		file,
		"ftp://ranges.example/",
		"https://",
		"https://ranges.example/?key=1",
		"https://ranges.example/?",
		"https://ranges.example/#",
		"http://:8080",
		"https://user:pass@ranges.example/",
		"http://%zz",
	} {
		if _, err := breached.Open(bad, 0, nil); err == nil {
			t.Errorf("Open(%q) accepted", bad)
		}
	}
	for _, good := range []string{newCorpus(t).writeDir(t, "", "\n"), "https://api.pwnedpasswords.com", "http://127.0.0.1:9/mirror/"} {
		if _, err := breached.Open(good, 0, nil); err != nil {
			t.Errorf("Open(%q): %v", good, err)
		}
	}
}

// TestOpenErrorsHideTheUserinfo: a range API URL that does not parse is
// refused without quoting it, or any piece of it (net/url quotes the
// escape or port it stumbled on), since it may hold a user and password:
// the error is printed at start.
func TestOpenErrorsHideTheUserinfo(t *testing.T) {
	for _, raw := range []string{
		"https://Alic3Usr:S3cr3t%zzPw@ranges.example/",
		"https://Alic3Usr:S3cr3t/Pw@ranges.example/",
		"https://Alic3Usr:S3cr3tPw@ranges.example:99x/",
		"http://Alic3Usr:S3cr3tPw@ranges.example/%zz",
	} {
		_, err := breached.Open(raw, 0, nil)
		if err == nil {
			t.Errorf("%s: accepted", raw)
			continue
		}
		for _, piece := range []string{"Alic3", "Usr", "S3cr3t", "Pw", "ranges.example"} {
			if strings.Contains(err.Error(), piece) {
				t.Errorf("%s: the error quotes %q: %v", raw, piece, err)
			}
		}
	}
}

// TestErrorsQuoteNoPrefixTheAPIEchoes: net/http quotes pieces of an
// answer it cannot use (its status, a Location it cannot parse, a broken
// header) in its errors, and a server's reason phrase is its own to word;
// a mirror or a proxy that echoes the path it was asked for would have the
// lookup's error, which is logged, carry the prefix, in either case.
func TestErrorsQuoteNoPrefixTheAPIEchoes(t *testing.T) {
	p := breachedPasswords[0]
	prefix := sha1Hex(p)[:5]
	for name, answer := range map[string]string{
		"reason phrase":        "HTTP/1.1 503 Range " + prefix + " unavailable\r\nContent-Length: 0\r\n\r\n",
		"reason in lower case": "HTTP/1.1 404 no /range/" + strings.ToLower(prefix) + "\r\nContent-Length: 0\r\n\r\n",
		"bad Location":         "HTTP/1.1 302 Found\r\nLocation: http://[::1%zz/range/" + prefix + "\r\nContent-Length: 0\r\n\r\n",
		"bad status code":      "HTTP/1.1 " + prefix + "\r\n\r\n",
		"bad header":           "HTTP/1.1 200 OK\r\nX-Range-" + prefix + "\r\n\r\n",
		"bad Content-Length":   "HTTP/1.1 200 OK\r\nContent-Length: " + prefix + "\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				conn, buf, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				buf.WriteString(answer)
				buf.Flush()
			}))
			defer srv.Close()
			got, err := open(t, srv.URL).Breached(t.Context(), p)
			if err == nil || got {
				t.Fatalf("Breached = %v, %v; want false and an error", got, err)
			}
			if strings.Contains(strings.ToUpper(err.Error()), prefix) {
				t.Errorf("error %q quotes the prefix", err)
			}
		})
	}
}
