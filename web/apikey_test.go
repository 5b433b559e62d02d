package web_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// keyClock is a settable clock for a replica.
type keyClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *keyClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *keyClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const attemptJSON = `{"kind":"login","account":"gina","client_ip":"192.0.2.40"}`

// TestAPIKeyRefused: a missing, malformed, unknown or revoked key is 401
// invalid_api_key with WWW-Authenticate: Bearer, whatever the body.
func TestAPIKeyRefused(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	key := env.AddAPIKey(t, "shop")
	revoked := env.AddAPIKey(t, "old")
	if err := env.Service.RevokeAPIKey(t.Context(), "old"); err != nil {
		t.Fatal(err)
	}
	c := xcloaktest.Client(t, "127.0.9.3")
	for name, header := range map[string][]string{
		"missing":       nil,
		"empty":         {"Authorization", ""},
		"basic":         {"Authorization", "Basic " + key},
		"no prefix":     {"Authorization", "Bearer " + strings.TrimPrefix(key, auth.APIKeyPrefix)},
		"short":         {"Authorization", "Bearer " + key[:len(key)-1]},
		"unknown":       {"Authorization", "Bearer " + auth.APIKeyPrefix + strings.Repeat("A", len(key)-len(auth.APIKeyPrefix))},
		"revoked":       {"Authorization", "Bearer " + revoked},
		"bad body, too": {"Authorization", "Bearer " + revoked, "X-Ignored", "x"},
	} {
		resp, body := post(t, c, base+"/api/v1/attempts", jsonType, attemptJSON, header...)
		if resp.StatusCode != 401 || strings.TrimSpace(body) != `{"error":"invalid_api_key"}` || resp.Header.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("%s key: %d %s WWW-Authenticate %q; want 401 invalid_api_key, Bearer", name, resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if resp, body := post(t, c, base+"/api/v1/attempts", jsonType, attemptJSON, "Authorization", "bearer "+key); resp.StatusCode != 200 {
		t.Errorf("valid key: %d %s", resp.StatusCode, body)
	}
}

// TestAPIKeyRevokedWithinASecond: a revoked key is refused at once by the
// replica that revoked it, and by another once its list of keys is a
// second old.
func TestAPIKeyRevokedWithinASecond(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	first := env.Start(t)
	clk := &keyClock{t: time.Now()}
	second := env.Replica(t, xcloaktest.Options{Now: clk.Now}).Start(t)
	key := env.AddAPIKey(t, "shop")
	c := xcloaktest.Client(t, "127.0.9.4")
	ask := func(base string) int {
		resp, _ := post(t, c, base+"/api/v1/attempts", jsonType, attemptJSON, "Authorization", "Bearer "+key)
		return resp.StatusCode
	}
	if a, b := ask(first), ask(second); a != 200 || b != 200 {
		t.Fatalf("before revocation: %d and %d, want 200", a, b)
	}
	if err := env.Service.RevokeAPIKey(t.Context(), "shop"); err != nil {
		t.Fatal(err)
	}
	if got := ask(first); got != 401 {
		t.Fatalf("the revoking replica: %d, want 401 at once", got)
	}
	if got := ask(second); got != 200 {
		t.Fatalf("the other replica within its second: %d, want 200 from its list", got)
	}
	clk.Add(time.Second)
	if got := ask(second); got != 401 {
		t.Fatalf("the other replica a second later: %d, want 401", got)
	}
}

// TestAPIKeyFailuresLimited: a network's failed key checks are limited
// (429 with Retry-After past the limit, before any lookup); a valid key
// still passes from it, and another network is not held.
func TestAPIKeyFailuresLimited(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleAPIKeyIP, 3) }})
	base := env.Start(t)
	key := env.AddAPIKey(t, "shop")
	sprayer := xcloaktest.Client(t, "127.0.9.5")
	bad := auth.APIKeyPrefix + strings.Repeat("B", len(key)-len(auth.APIKeyPrefix))
	var statuses []int
	var last *http.Response
	for range 5 {
		resp, _ := post(t, sprayer, base+"/api/v1/attempts", jsonType, attemptJSON, "Authorization", "Bearer "+bad)
		statuses = append(statuses, resp.StatusCode)
		last = resp
	}
	if want := []int{401, 401, 429, 429, 429}; !slices.Equal(statuses, want) || last.Header.Get("Retry-After") == "" {
		t.Fatalf("failed checks: %v (Retry-After %q), want %v with Retry-After", statuses, last.Header.Get("Retry-After"), want)
	}
	if resp, body := post(t, sprayer, base+"/api/v1/attempts", jsonType, attemptJSON, "Authorization", "Bearer "+key); resp.StatusCode != 200 {
		t.Fatalf("valid key from the locked network: %d %s, want 200", resp.StatusCode, body)
	}
	other := xcloaktest.Client(t, "127.0.9.6")
	if resp, _ := post(t, other, base+"/api/v1/attempts", jsonType, attemptJSON, "Authorization", "Bearer "+bad); resp.StatusCode != 401 {
		t.Fatalf("another network's bad key: %d, want 401", resp.StatusCode)
	}
}
