package web_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestSprayedPasswordOverHTTP: one password tried on SprayAccounts
// accounts, each from an address of its own as a botnet does, is refused
// with 429 for its own account's owner, by login_password and not as a
// lockout; and neither the password nor its plain SHA-256 is anywhere in
// Redis afterwards.
func TestSprayedPasswordOverHTTP(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	const sprayed = "Spring2026!"
	env.AddUser(t, "owner@example.com", sprayed, false)
	n := env.Auth.SprayAccounts
	for i := range n {
		c := xcloaktest.Client(t, fmt.Sprintf("127.0.43.%d", i+1))
		if resp, body := post(t, c, base+"/api/v1/login", jsonType, loginJSON(fmt.Sprintf("user%d@example.com", i), sprayed)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("account %d of %d: %d %s; want 401", i+1, n, resp.StatusCode, body)
		}
	}
	owner := xcloaktest.Client(t, "127.0.44.1")
	resp, body := post(t, owner, base+"/api/v1/login", jsonType, loginJSON("owner@example.com", sprayed))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the owner with the sprayed password: %d %s; want 429 with Retry-After", resp.StatusCode, body)
	}
	if resp, body := post(t, owner, base+"/api/v1/login", jsonType, loginJSON("owner@example.com", "not sprayed")); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("another password on the same account: %d %s; want 401", resp.StatusCode, body)
	}

	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.44.2")
	signIn(t, admin, base, adminEmail, anyPassword)
	env.Flush(t)
	s, raw := getStats(t, admin, base, "5m")
	if s.RejectedByRule[auth.RuleLoginPassword] != 1 || s.RejectedByRule[auth.RuleLockout] != 0 || s.ActiveLockouts != 0 || s.Lockouts != 0 {
		t.Errorf("stats: %s; want one rejection by login_password, no lockout", raw)
	}
	var events int
	var detail string
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*), coalesce(max(detail::text), '') FROM security_events WHERE kind = 'password_sprayed'`).Scan(&events, &detail); err != nil {
		t.Fatal(err)
	}
	if events != 1 || !strings.Contains(detail, fmt.Sprintf(`"accounts": "%d"`, n)) {
		t.Errorf("%d password_sprayed events, detail %s; want one, of %d accounts", events, detail, n)
	}

	// Nothing in Redis is the password or its plain hash, in any form.
	sum := sha256.Sum256([]byte(sprayed))
	forbidden := []string{sprayed, hex.EncodeToString(sum[:]), hex.EncodeToString(sum[:16]), string(sum[:16]),
		base64.RawURLEncoding.EncodeToString(sum[:]), base64.RawURLEncoding.EncodeToString(sum[:16]),
		base64.StdEncoding.EncodeToString(sum[:])}
	ctx := t.Context()
	var scanned int
	iter := env.Redis.Scan(ctx, 0, env.Prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		scanned++
		var values []string
		switch typ := env.Redis.Type(ctx, key).Val(); typ {
		case "string":
			values = []string{env.Redis.Get(ctx, key).Val()}
		case "hash":
			for k, v := range env.Redis.HGetAll(ctx, key).Val() {
				values = append(values, k, v)
			}
		case "zset":
			values = env.Redis.ZRange(ctx, key, 0, -1).Val()
		case "list":
			values = env.Redis.LRange(ctx, key, 0, -1).Val()
		case "set":
			values = env.Redis.SMembers(ctx, key).Val()
		case "none": // expired since the scan saw it
		default:
			t.Errorf("key %q of type %s not checked", key, typ)
		}
		for _, v := range append(values, key) {
			for _, f := range forbidden {
				if strings.Contains(v, f) {
					t.Errorf("Redis key %q holds the password or its plain SHA-256 (%q)", key, f)
				}
			}
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if scanned == 0 {
		t.Fatal("no Redis keys under the test's prefix: nothing was checked")
	}
}
