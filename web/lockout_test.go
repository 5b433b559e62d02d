package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestDeviceCookieSurvivesLockout: an attacker (plain HTTP client) locks the
// account; the owner's browser, which signed in before, still signs in; a
// fresh browser gets the same 429 as any limit.
func TestDeviceCookieSurvivesLockout(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	base := env.Start(t)
	env.AddUser(t, "owner@example.com", "owner password", false)
	owner := xcloaktest.Client(t, "127.0.8.1")
	if resp, _ := post(t, owner, base+"/api/v1/login", jsonType, loginJSON("owner@example.com", "owner password")); resp.StatusCode != 200 {
		t.Fatalf("owner's first sign-in: %d", resp.StatusCode)
	}

	attacker := xcloaktest.Client(t, "127.0.8.2")
	for i := range env.Auth.Lockout.Threshold {
		if resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("owner@example.com", fmt.Sprint("guess", i))); resp.StatusCode != 401 {
			t.Fatalf("guess %d: %d", i, resp.StatusCode)
		}
	}
	locked, lockedBody := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("owner@example.com", "owner password"))
	if locked.StatusCode != 429 {
		t.Fatalf("attacker with the right password during the lockout: %d, want 429", locked.StatusCode)
	}
	fresh := xcloaktest.Client(t, "127.0.8.3")
	resp, body := post(t, fresh, base+"/api/v1/login", jsonType, loginJSON("owner@example.com", "owner password"))
	if resp.StatusCode != 429 || !strings.Contains(body, "too_many_attempts") || strings.Contains(body, "lock") || strings.Contains(lockedBody, "lock") {
		t.Fatalf("fresh browser: %d %s; want the plain rate-limit answer", resp.StatusCode, body)
	}
	if resp, _ := post(t, owner, base+"/api/v1/login", jsonType, loginJSON("owner@example.com", "owner password")); resp.StatusCode != http.StatusOK {
		t.Fatalf("owner's browser during the lockout: %d, want 200", resp.StatusCode)
	}
}
