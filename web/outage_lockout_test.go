package web_test

import (
	"fmt"
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
