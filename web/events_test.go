package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestMalformedSignInsAreLimited: malformed sign-ins, whether the body
// cannot be read or the fields are invalid, pass the per-network limit
// like any other, so a flood of them is answered 429 once it is spent.
func TestMalformedSignInsAreLimited(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.LoginIP.Count = 6 }})
	base := env.Start(t)
	c := xcloaktest.Client(t, "127.0.41.1")
	malformed := []struct{ path, ctype, body string }{
		{"/api/v1/login", jsonType, loginJSON("not an address", "x")},
		{"/api/v1/login", jsonType, `{"email":`},
		{"/api/v1/login", "text/plain", "hello"},
		{"/login", formType, url.Values{"email": {"nobody"}, "password": {"x"}}.Encode()},
		{"/login", formType, "email=%zz"},
		{"/api/v1/login", jsonType, loginJSON("ann@example.com", "")},
	}
	for i, m := range malformed {
		if resp, body := post(t, c, base+m.path, m.ctype, m.body); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("malformed sign-in %d: %d %s, want 400", i, resp.StatusCode, body)
		}
	}
	for i, m := range malformed {
		if resp, body := post(t, c, base+m.path, m.ctype, m.body); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("malformed sign-in %d past the per-network limit: %d %s, want 429 with Retry-After", i, resp.StatusCode, body)
		}
	}
	if resp, _ := post(t, c, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "a guess")); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("well-formed sign-in after the malformed flood: %d, want 429", resp.StatusCode)
	}

	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.41.2")
	signIn(t, admin, base, adminEmail, anyPassword)
	env.Flush(t)
	s, _ := getStats(t, admin, base, "5m")
	if s.Attempts != 14 || s.Invalid != 6 || s.RejectedByRule[auth.RuleLoginIP] != 7 || s.Successes != 1 {
		t.Fatalf("stats: %d attempts, %d invalid, %d rejected by login_ip, %d successes; want 14, 6, 7, 1", s.Attempts, s.Invalid, s.RejectedByRule[auth.RuleLoginIP], s.Successes)
	}
}
