package web_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/ratelimit"
)

// TestLockoutHoldsThroughRedisOutage: an account locked in Redis stays
// locked when Redis goes away under the local policy, since the replica
// loads the lockouts Postgres records as in force; its owner's browser,
// known from an earlier sign-in, still gets in.
func TestLockoutHoldsThroughRedisOutage(t *testing.T) {
	srv := testenv.PrivateRedis(t)
	env := xcloaktest.New(t, xcloaktest.Options{
		Redis: fastRedis(t, srv.URL()), Prefix: "xcloak:",
		Auth: func(c *auth.Config) {
			c.RedisFailure = ratelimit.FailLocal
			c.Lockout.Threshold = 3
			c.RejectionMemory = 0 // every guess asks Redis, or the policy
		},
	})
	base := env.Start(t)
	env.AddUser(t, "owner@example.com", "owner's password", false)
	owner := xcloaktest.Client(t, "127.0.50.1")
	if resp, _ := post(t, owner, base+"/api/v1/login", jsonType, loginJSON("owner@example.com", "owner's password")); resp.StatusCode != 200 {
		t.Fatalf("owner's first sign-in: %d", resp.StatusCode)
	}
	attacker := xcloaktest.Client(t, "127.0.50.2")
	for i := range env.Auth.Lockout.Threshold {
		if resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("owner@example.com", fmt.Sprint("a guess ", i))); resp.StatusCode != 401 {
			t.Fatalf("guess before the lock: %d", resp.StatusCode)
		}
	}
	if resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("owner@example.com", "a guess")); resp.StatusCode != 429 {
		t.Fatalf("guess at the locked account with Redis up: %d, want 429", resp.StatusCode)
	}

	srv.Stop()
	statuses := map[int]int{}
	for range 20 {
		resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("owner@example.com", "another guess"))
		statuses[resp.StatusCode]++
	}
	if !env.Service.Degraded() {
		t.Fatal("not in degraded mode with Redis down")
	}
	if statuses[429] != 20 {
		t.Fatalf("guesses at the locked account with Redis down, local policy: %v; want all 20 rejected as locked", statuses)
	}
	if resp, _ := post(t, owner, base+"/api/v1/login", jsonType, loginJSON("owner@example.com", "owner's password")); resp.StatusCode != 200 {
		t.Fatalf("owner's known browser with Redis down: %d, want 200", resp.StatusCode)
	}
}

// TestLimitedDeviceCookieQueriesNothingInOutage: while Redis is away, a
// sign-in that the failure policy refuses costs no Postgres query either,
// whatever device cookie it carries, as with Redis up
// (TestLimitedDeviceCookieQueriesNothing): under local, one that the
// in-process limits refuse; under closed, every one. The replica's memory
// of rejections, which answers such sign-ins with Redis up, is Redis'
// alone, so the outage must not turn each cookie a client collected for
// an account of its own into a lookup.
func TestLimitedDeviceCookieQueriesNothingInOutage(t *testing.T) {
	for _, tc := range []struct {
		policy ratelimit.FailurePolicy
		want   int
	}{
		{ratelimit.FailLocal, http.StatusTooManyRequests},
		{ratelimit.FailClosed, http.StatusServiceUnavailable},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			srv := testenv.PrivateRedis(t)
			env := xcloaktest.New(t, xcloaktest.Options{
				Redis: fastRedis(t, srv.URL()), Prefix: "xcloak:",
				Auth: func(c *auth.Config) {
					c.RedisFailure = tc.policy
					c.Limits.SetCount(auth.RuleLoginIP, 1)
				},
			})
			base := env.Start(t)
			cookies := mallorysCookies(t, env, base, "127.0.51")

			srv.Stop()
			flood := xcloaktest.Client(t, "127.0.51.49")
			if tc.policy == ratelimit.FailLocal {
				// The network's one sign-in in process, then its
				// limit.
				if resp, _ := post(t, flood, base+"/api/v1/login", jsonType, loginJSON("mallory@example.com", "a guess")); resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("first sign-in with Redis down: %d, want 401", resp.StatusCode)
				}
			}
			if resp, _ := post(t, flood, base+"/api/v1/login", jsonType, loginJSON("mallory@example.com", "a guess")); resp.StatusCode != tc.want {
				t.Fatalf("a sign-in the policy refuses, without a cookie: %d, want %d", resp.StatusCode, tc.want)
			}
			if !env.Service.Degraded() {
				t.Fatal("not in degraded mode with Redis down")
			}
			floodWithCookies(t, env, base, flood, "mallory@example.com", cookies, tc.want)
		})
	}
}
