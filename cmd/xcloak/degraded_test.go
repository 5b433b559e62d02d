package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/internal/testenv"
)

// readyz returns /readyz's status and body.
func readyz(t *testing.T, base string) (int, map[string]string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: time.Minute}).Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body map[string]string
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("/readyz body %q: %v", raw, err)
	}
	return resp.StatusCode, body
}

// TestServeStartsWithoutRedis runs "xcloak serve" while its Redis is down,
// under each failure policy: it starts in degraded mode and says so;
// /readyz is ready under local and open (Postgres answers) and not under
// closed, and names the state; sign-ins follow the policy; and once Redis
// is started the shared limits take over by themselves. When it dies
// again, readiness follows the policy once more.
func TestServeStartsWithoutRedis(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"local", "open", "closed"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			redisSrv := testenv.PrivateRedis(t)
			vars := storeSettings(t)
			vars["XCLOAK_REDIS_URL"] = redisSrv.URL()
			vars["XCLOAK_REDIS_FAILURE"] = policy
			const email, password = "ann@example.com", "correct horse battery"
			addUser(t, vars, email, password+"\n")
			redisSrv.Stop()

			srv := startServe(t, vars)
			if !strings.Contains(srv.stderr.String(), "redis does not answer at start") {
				t.Errorf("stderr does not say that Redis was down at start:\n%s", srv.stderr.String())
			}
			status, body := readyz(t, srv.base)
			wantStatus, wantSignIn := http.StatusOK, http.StatusOK
			if policy == "closed" {
				wantStatus, wantSignIn = http.StatusServiceUnavailable, http.StatusServiceUnavailable
			}
			if status != wantStatus || body["postgres"] != "ok" || body["redis"] != "unavailable" || body["limits"] != policy+" (degraded)" {
				t.Fatalf("/readyz with Redis down under %s: %d %v; want %d, postgres ok, redis unavailable, limits %q",
					policy, status, body, wantStatus, policy+" (degraded)")
			}
			if resp := signIn(t, srv.base, email, password); resp.StatusCode != wantSignIn {
				t.Fatalf("sign-in with Redis down under %s: %d, want %d", policy, resp.StatusCode, wantSignIn)
			}

			redisSrv.Start()
			deadline := time.Now().Add(20 * time.Second)
			for {
				status, body = readyz(t, srv.base)
				if status == http.StatusOK && body["redis"] == "ok" && body["limits"] == "redis" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("/readyz 20 s after Redis started: %d %v; want ready on the shared limits", status, body)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if resp := signIn(t, srv.base, email, password); resp.StatusCode != http.StatusOK {
				t.Fatalf("sign-in once Redis is back: %d", resp.StatusCode)
			}

			// Lost again while serving: readiness follows the policy.
			redisSrv.Stop()
			status, body = readyz(t, srv.base)
			if status != wantStatus || body["redis"] != "unavailable" || body["limits"] != policy+" (degraded)" {
				t.Fatalf("/readyz after Redis died under %s: %d %v; want %d, limits %q", policy, status, body, wantStatus, policy+" (degraded)")
			}
		})
	}
}
