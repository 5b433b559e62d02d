package client_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/client"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// These tests run the client against a real XCloak on the test Redis and
// Postgres.

// newXCloak starts an XCloak with an application's key and returns a
// Client of it.
func newXCloak(t *testing.T, o xcloaktest.Options) (*xcloaktest.Env, *client.Client) {
	t.Helper()
	env := xcloaktest.New(t, o)
	c, err := client.New(env.Start(t), env.AddAPIKey(t, "shop"))
	if err != nil {
		t.Fatal(err)
	}
	return env, c
}

func login(account, ip string) client.AttemptRequest {
	return client.AttemptRequest{Kind: client.Login, Account: account, ClientIP: netip.MustParseAddr(ip)}
}

func TestAllowAndOutcome(t *testing.T) {
	_, c := newXCloak(t, xcloaktest.Options{})
	d, err := c.Attempt(t.Context(), login("ann", "192.0.2.1"))
	if err != nil || d.Kind != client.Allow || d.AttemptID == "" || d.Reason != "" || d.RetryAfter != 0 {
		t.Fatalf("Attempt = %+v, %v; want an allow with an attempt id", d, err)
	}
	if err := c.Outcome(t.Context(), d.AttemptID, client.Success); err != nil {
		t.Fatalf("Outcome = %v", err)
	}
	if err := c.Outcome(t.Context(), d.AttemptID, client.Success); !errors.Is(err, client.ErrUnknownAttempt) {
		t.Fatalf("second Outcome of one id = %v, want ErrUnknownAttempt", err)
	}
	if err := c.Outcome(t.Context(), "made-up", client.Failure); !errors.Is(err, client.ErrUnknownAttempt) {
		t.Fatalf("Outcome of a made-up id = %v, want ErrUnknownAttempt", err)
	}

	d, err = c.Attempt(t.Context(), client.AttemptRequest{Kind: client.Reset, Account: "ann", ClientIP: netip.MustParseAddr("2001:db8::1")})
	if err != nil || d.Kind != client.Allow {
		t.Fatalf("reset Attempt = %+v, %v; want allow", d, err)
	}
}

func TestDenyAfterTheAccountsLimit(t *testing.T) {
	const limit = 3
	_, c := newXCloak(t, xcloaktest.Options{Auth: func(cfg *auth.Config) { cfg.Limits.SetCount(auth.RuleLoginAccount, limit) }})
	for i := range limit {
		if d, err := c.Attempt(t.Context(), login("bob", "192.0.2.2")); err != nil || d.Kind != client.Allow {
			t.Fatalf("attempt %d = %+v, %v; want allow", i+1, d, err)
		}
	}
	d, err := c.Attempt(t.Context(), login("BOB", "192.0.2.3"))
	if err != nil || d.Kind != client.Deny || d.Reason != client.ReasonRateLimited || d.AttemptID != "" || d.RetryAfter <= 0 {
		t.Fatalf("attempt %d = %+v, %v; want a rate-limited deny with a retry", limit+1, d, err)
	}
}

func TestDenyLockedAfterFailures(t *testing.T) {
	env, c := newXCloak(t, xcloaktest.Options{Auth: func(cfg *auth.Config) { cfg.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	for i := range env.Auth.Lockout.Threshold {
		d, err := c.Attempt(t.Context(), login("carol", "198.51.100.1"))
		if err != nil || d.Kind != client.Allow {
			t.Fatalf("attempt %d = %+v, %v; want allow", i+1, d, err)
		}
		if err := c.Outcome(t.Context(), d.AttemptID, client.Failure); err != nil {
			t.Fatalf("failure %d: %v", i+1, err)
		}
	}
	d, err := c.Attempt(t.Context(), login("carol", "198.51.100.2"))
	if err != nil || d.Kind != client.Deny || d.Reason != client.ReasonLocked || d.RetryAfter <= 0 || d.RetryAfter > env.Auth.Lockout.Duration {
		t.Fatalf("after %d failures: %+v, %v; want a locked deny of at most %v", env.Auth.Lockout.Threshold, d, err, env.Auth.Lockout.Duration)
	}
}

func TestChallengeInAttackMode(t *testing.T) {
	env, c := newXCloak(t, xcloaktest.Options{})
	if _, err := env.Attack.SwitchAttack(t.Context(), true, "test"); err != nil {
		t.Fatal(err)
	}
	req := login("dave", "198.51.100.3")
	req.Device = "new-phone"
	d, err := c.Attempt(t.Context(), req)
	if err != nil || d.Kind != client.Challenge || d.AttemptID == "" {
		t.Fatalf("a new device in attack mode: %+v, %v; want a challenge", d, err)
	}
	if err := c.Outcome(t.Context(), d.AttemptID, client.Failure); err != nil {
		t.Fatalf("a challenge's outcome: %v", err)
	}
}

func TestRefusedKeys(t *testing.T) {
	env, _ := newXCloak(t, xcloaktest.Options{})
	revoked := env.AddAPIKey(t, "old-shop")
	if err := env.Service.RevokeAPIKey(t.Context(), "old-shop", "cli"); err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]string{
		"unknown": "xck_" + strings.Repeat("A", 43),
		"revoked": revoked,
		"not one": "password",
	} {
		c, err := client.New(env.URL, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Attempt(t.Context(), login("erin", "192.0.2.4")); !errors.Is(err, client.ErrInvalidAPIKey) {
			t.Errorf("%s key: Attempt = %v, want ErrInvalidAPIKey", name, err)
		}
		if err := c.Outcome(t.Context(), "some-id", client.Success); !errors.Is(err, client.ErrInvalidAPIKey) {
			t.Errorf("%s key: Outcome = %v, want ErrInvalidAPIKey", name, err)
		}
	}
}

func TestServerRefusalNamesTheField(t *testing.T) {
	_, c := newXCloak(t, xcloaktest.Options{})
	_, err := c.Attempt(t.Context(), login(strings.Repeat("a", 400), "192.0.2.5"))
	var re *client.RequestError
	if !errors.As(err, &re) || re.Field != "account" || re.Message == "" {
		t.Fatalf("an account of 400 bytes: %v, want a RequestError naming account", err)
	}
}
