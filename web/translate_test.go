package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/web"
)

// The tests in this file run a whole web.Server over an auth.Service on
// authtest's in-memory stores, limits and mailer, with no database, Redis
// or mail server: they check how the web layer translates the service's
// answers into HTTP, whatever stores the service. The same answers against
// the real stores are checked by this package's other tests.

// memoryServer is a web.Server over authtest.NewService, with the
// service's settings changed by configure if set.
func memoryServer(t *testing.T, configure func(*auth.Config)) (http.Handler, *authtest.Service) {
	t.Helper()
	svc := authtest.NewService(t, configure)
	// Plain http, as in the other tests; the secure attributes have their
	// own test.
	cfg := web.Config{PublicURL: svc.Config.PublicURL, InsecureCookies: true}
	return web.NewServer(cfg, svc.Service, nil, func(context.Context) map[string]error { return nil }, nil), svc
}

// serveLogin sends a JSON sign-in body from addr and returns the response.
func serveLogin(t *testing.T, h http.Handler, addr, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/api/v1/login", strings.NewReader(body))
	req.Header.Set("Content-Type", jsonType)
	req.RemoteAddr = addr + ":40000"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestTranslateWrongCredentials: a wrong password and an unknown account
// are both 401, with the same body, so that the answer tells no one which
// accounts exist.
func TestTranslateWrongCredentials(t *testing.T) {
	h, svc := memoryServer(t, nil)
	if _, err := svc.CreateUser(t.Context(), "ann@example.com", "the right password", false, "cli"); err != nil {
		t.Fatal(err)
	}
	wrong := serveLogin(t, h, "192.0.2.1", loginJSON("ann@example.com", "a wrong password"))
	unknown := serveLogin(t, h, "192.0.2.2", loginJSON("nobody@example.com", "a wrong password"))
	if wrong.Code != http.StatusUnauthorized || unknown.Code != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d, unknown account: %d; want 401 and 401", wrong.Code, unknown.Code)
	}
	if wrong.Body.String() != unknown.Body.String() {
		t.Errorf("bodies differ:\nwrong password:  %s\nunknown account: %s", wrong.Body, unknown.Body)
	}
	if len(wrong.Result().Cookies()) != 0 {
		t.Errorf("a refused sign-in set cookies: %v", wrong.Result().Cookies())
	}
}

// TestTranslateRateLimited: past the limit of an address, a sign-in is 429
// with Retry-After and the same number of seconds in retry_after_seconds.
func TestTranslateRateLimited(t *testing.T) {
	const limit = 3
	h, _ := memoryServer(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginIP, limit) })
	for i := range limit {
		// A different account each time, so that only the address's
		// limit is reached.
		rec := serveLogin(t, h, "192.0.2.7", loginJSON("user"+strconv.Itoa(i)+"@example.com", "a wrong password"))
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("attempt %d within the limit: %d %s, want 401", i+1, rec.Code, rec.Body)
		}
	}
	rec := serveLogin(t, h, "192.0.2.7", loginJSON("another@example.com", "a wrong password"))
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("attempt past the limit: %d %s, want 429", rec.Code, rec.Body)
	}
	header, err := strconv.Atoi(rec.Header().Get("Retry-After"))
	if err != nil || header < 1 {
		t.Fatalf("Retry-After %q, want a positive number of seconds", rec.Header().Get("Retry-After"))
	}
	var body struct {
		RetryAfterSeconds int `json:"retry_after_seconds"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("429 body %q: %v", rec.Body, err)
	}
	if body.RetryAfterSeconds != header {
		t.Errorf("retry_after_seconds %d, Retry-After %d; want the same", body.RetryAfterSeconds, header)
	}
	// Another address is not held by this one's limit.
	if rec := serveLogin(t, h, "192.0.2.8", loginJSON("another@example.com", "a wrong password")); rec.Code != http.StatusUnauthorized {
		t.Errorf("another address: %d, want 401", rec.Code)
	}
}

// TestTranslateMalformedBody: a body that is not the JSON of a sign-in is
// 400.
func TestTranslateMalformedBody(t *testing.T) {
	h, _ := memoryServer(t, nil)
	for _, body := range []string{`{"email":`, `[]`, `{"email":"ann@example.com","password":"x","extra":1}`, "not json"} {
		if rec := serveLogin(t, h, "192.0.2.9", body); rec.Code != http.StatusBadRequest {
			t.Errorf("body %q: %d %s, want 400", body, rec.Code, rec.Body)
		}
	}
}

// TestTranslateSignIn: the right password is 200 and sets the session and
// device cookies.
func TestTranslateSignIn(t *testing.T) {
	h, svc := memoryServer(t, nil)
	if _, err := svc.CreateUser(t.Context(), "ann@example.com", "the right password", false, "cli"); err != nil {
		t.Fatal(err)
	}
	rec := serveLogin(t, h, "192.0.2.10", loginJSON("Ann@Example.com", "the right password"))
	if rec.Code != http.StatusOK {
		t.Fatalf("sign-in: %d %s, want 200", rec.Code, rec.Body)
	}
	names := map[string]bool{}
	for _, c := range rec.Result().Cookies() {
		if c.Value != "" {
			names[c.Name] = true
		}
	}
	device := svc.DeviceCookieName("ann@example.com")
	if !names["xcloak_session"] || !names[device] {
		t.Errorf("cookies set: %v; want xcloak_session and %s", names, device)
	}
}
