package web_test

import (
	"fmt"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestRetypedPasswordDoesNotLockOverHTTP: on the real stack (Redis,
// Postgres), a user who retypes the same wrong password more times than
// the lockout's threshold still signs in with the right one, while as many
// distinct wrong passwords as the threshold lock the account.
func TestRetypedPasswordDoesNotLockOverHTTP(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.Lockout.Threshold = 3
		c.Limits.SetCount(auth.RuleLoginAccount, 100)
		c.Limits.SetCount(auth.RuleLoginIP, 100)
	}})
	base := env.Start(t)
	env.AddUser(t, "forgetful@example.com", "the new password", false)
	env.AddUser(t, "target@example.com", "the target's password", false)
	threshold := env.Auth.Lockout.Threshold

	user := xcloaktest.Client(t, "127.0.60.1")
	for i := range threshold + 5 {
		if resp, _ := post(t, user, base+"/api/v1/login", jsonType, loginJSON("forgetful@example.com", "the old password")); resp.StatusCode != 401 {
			t.Fatalf("the old password, time %d of %d: %d, want 401 (not locked)", i+1, threshold+5, resp.StatusCode)
		}
	}
	if resp, _ := post(t, user, base+"/api/v1/login", jsonType, loginJSON("forgetful@example.com", "the new password")); resp.StatusCode != 200 {
		t.Fatalf("the right password after retyping an old one: %d, want 200", resp.StatusCode)
	}

	attacker := xcloaktest.Client(t, "127.0.60.2")
	for i := range threshold {
		if resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("target@example.com", fmt.Sprint("guess ", i))); resp.StatusCode != 401 {
			t.Fatalf("distinct guess %d of %d: %d, want 401", i+1, threshold, resp.StatusCode)
		}
	}
	if resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("target@example.com", "the target's password")); resp.StatusCode != 429 {
		t.Fatalf("the right password after %d distinct guesses: %d, want 429 (locked)", threshold, resp.StatusCode)
	}
}
