package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// rejectedSignIn is the request of `stuffing compare`'s rejections
// (cmd/stuffing/wrk/login.lua): a JSON sign-in to one account past its
// limit.
const rejectedSignIn = `{"email":"wrk-victim@example.com","password":"not-the-password"}`

// rejectingEnv is a server with the default attack detection whose
// wrk-victim@example.com is past its limit, and a request for it that
// serve answers with 429.
func rejectingEnv(tb testing.TB) (*xcloaktest.Env, func() *http.Request) {
	tb.Helper()
	env := xcloaktest.New(tb, xcloaktest.Options{Attack: xcloaktest.DetectAttacks})
	req := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/api/v1/login", strings.NewReader(rejectedSignIn))
		r.Header.Set("Content-Type", "application/json")
		r.RemoteAddr = "127.0.0.1:40000"
		return r
	}
	for range 100 {
		w := httptest.NewRecorder()
		env.Handler.ServeHTTP(w, req())
		if w.Code == http.StatusTooManyRequests {
			return env, req
		}
		if w.Code != http.StatusUnauthorized {
			tb.Fatalf("sign-in answered %d %s, want 401s then 429", w.Code, w.Body)
		}
	}
	tb.Fatal("100 wrong passwords and still no 429")
	return nil, nil
}

// BenchmarkRejectedSignIn is a rejected JSON sign-in through the whole
// handler chain, in process (no socket): the middleware, the body, the
// decision from the replica's memory of full rules, its event, metric and
// attack detection, and the 429.
func BenchmarkRejectedSignIn(b *testing.B) {
	env, req := rejectingEnv(b)
	body := strings.NewReader(rejectedSignIn)
	r := req()
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		body.Reset(rejectedSignIn)
		r.Body = io.NopCloser(body)
		clear(w.h)
		w.status = 0
		env.Handler.ServeHTTP(w, r)
		if w.status != http.StatusTooManyRequests {
			b.Fatalf("sign-in answered %d, want 429", w.status)
		}
	}
}

// discardWriter keeps the headers and the status and throws the body
// away, so that counting allocations counts only the handlers'.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}
func (w *discardWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}
