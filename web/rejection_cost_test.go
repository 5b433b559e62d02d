package web

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/race"
)

// headerWriter is a ResponseWriter that keeps its headers and throws the
// rest away, so that counting allocations counts only the handler's.
type headerWriter struct{ h http.Header }

func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) WriteHeader(int)             {}
func (w *headerWriter) Write(b []byte) (int, error) { return len(b), nil }

// TestRejectionAllocations: the 429 a flood of sign-ins gets, its
// Retry-After and its body, allocates nothing once warm, for the
// retry-afters of every default limit.
func TestRejectionAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts under -race count what sync.Pool drops")
	}
	s := &Server{log: slog.New(slog.DiscardHandler)}
	r := httptest.NewRequest("POST", "/api/v1/login", nil)
	w := &headerWriter{h: http.Header{}}
	for _, d := range []time.Duration{time.Second, 537 * time.Second, 15 * time.Minute} {
		err := error(&auth.LimitedError{RetryAfter: d})
		s.failJSON(w, r, err) // warm the pool
		if n := testing.AllocsPerRun(100, func() { s.failJSON(w, r, err) }); n > 0 {
			t.Errorf("retry after %v: %v allocations, want 0", d, n)
		}
	}
}

// rewindBody is a request body read again from its start after Rewind.
type rewindBody struct {
	b   []byte
	off int
}

func (b *rewindBody) Read(p []byte) (int, error) {
	if b.off == len(b.b) {
		return 0, io.EOF
	}
	n := copy(p, b.b[b.off:])
	b.off += n
	return n, nil
}
func (b *rewindBody) Close() error { return nil }

// TestSignInBodyAllocations: reading a JSON sign-in's body allocates only
// its two strings.
func TestSignInBodyAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts under -race count what sync.Pool drops")
	}
	body := &rewindBody{b: []byte(`{"email":"wrk-victim@example.com","password":"not-the-password"}`)}
	r := httptest.NewRequest("POST", "/api/v1/login", nil)
	r.Header.Set("Content-Type", "application/json")
	r.Body = body
	var in loginBody
	read := func() {
		body.off = 0
		if err := decodeJSON(r, &in, &in.Email, &in.Password); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if in.Email != "wrk-victim@example.com" || in.Password != "not-the-password" {
		t.Fatalf("read %+v", in)
	}
	if n := testing.AllocsPerRun(100, read); n > 2 {
		t.Errorf("%v allocations, want 2 (the email and the password)", n)
	}
}

// TestRetryAfterValues: every shared Retry-After value is its number of
// seconds, and adding to one leaves the others as they were.
func TestRetryAfterValues(t *testing.T) {
	for i, v := range retryAfterValues {
		if len(v) != 1 || v[0] != strconv.Itoa(i) {
			t.Fatalf("retryAfterValues[%d] = %q, want [%d]", i, v, i)
		}
	}
	h := http.Header{}
	h["Retry-After"] = retryAfterValues[7]
	h.Add("Retry-After", "x")
	if got := retryAfterValues[8][0]; got != "8" {
		t.Errorf("after Header.Add to the value of 7, the value of 8 is %q", got)
	}
}

// TestBodyBufferKeepsNoPassword: a JSON body's buffer goes back to the
// pool without the body in it, as the spraying key's does, so that no
// password lingers in memory kept for the next request, for either
// decoder.
func TestBodyBufferKeepsNoPassword(t *testing.T) {
	const password = "wrk-pooled-secret-password"
	for _, raw := range []string{
		`{"email":"wrk-pool@example.com","password":"` + password + `"}`,
		`{"email":"wrk-pool@example.com","password":"` + password + `\u0021"}`,
	} {
		seen := false
		for range 100 {
			r := httptest.NewRequest("POST", "/api/v1/login", strings.NewReader(raw))
			r.Header.Set("Content-Type", "application/json")
			var in loginBody
			if err := decodeJSON(r, &in, &in.Email, &in.Password); err != nil {
				t.Fatal(err)
			}
			buf := bodyBuffers.Get().(*bytes.Buffer)
			kept := buf.Bytes()
			kept = kept[:cap(kept)]
			bodyBuffers.Put(buf)
			if len(kept) == 0 {
				continue // a new buffer: the pool dropped the used one
			}
			seen = true
			if bytes.Contains(kept, []byte(password)) {
				t.Fatalf("%s: the pooled buffer still holds the password", raw)
			}
		}
		if !seen {
			t.Fatalf("%s: no used buffer came back from the pool", raw)
		}
	}
}

// TestPageBufferKeepsNoPage: a page's buffer goes back to the pool
// without the page in it, so that what a page shows once (new recovery
// codes, a form's token) lingers in no memory kept for the next request,
// whether the page rendered in full or failed half way.
func TestPageBufferKeepsNoPage(t *testing.T) {
	const secret = "wrk-pooled-recovery-code-1234"
	s := &Server{log: slog.New(slog.DiscardHandler)}
	failing := templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
		_, _ = io.WriteString(w, "<p>"+secret+"</p>")
		return errors.New("half way")
	})
	for _, c := range []templ.Component{templ.Raw("<p>" + secret + "</p>"), failing} {
		seen := false
		for range 100 {
			w := httptest.NewRecorder()
			s.render(w, httptest.NewRequest("GET", "/account/mfa", nil), http.StatusOK, c)
			buf := pageBuffers.Get().(*bytes.Buffer)
			kept := buf.Bytes()
			kept = kept[:cap(kept)]
			pageBuffers.Put(buf)
			if len(kept) == 0 {
				continue // a new buffer: the pool dropped the used one
			}
			seen = true
			if bytes.Contains(kept, []byte(secret)) {
				t.Fatal("the pooled buffer still holds the page")
			}
		}
		if !seen {
			t.Fatal("no used buffer came back from the pool")
		}
	}
}

// TestHeaderValue: headerValue reads what Header.Get does, for the keys
// it is given in canonical form.
func TestHeaderValue(t *testing.T) {
	r := httptest.NewRequest("POST", "/api/v1/login", nil)
	r.Header.Set("user-agent", "curl/8")
	r.Header.Add("Cookie", "")
	r.Header.Add("Cookie", "a=b")
	for _, key := range []string{"User-Agent", "Cookie", "Origin"} {
		if got, want := headerValue(r, key), r.Header.Get(key); got != want {
			t.Errorf("headerValue(%q) = %q, Header.Get %q", key, got, want)
		}
	}
}
