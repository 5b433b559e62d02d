package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestServeBelievesOnlyTrustedProxies runs serve as configured from the
// environment and sends sign-ins with invented X-Forwarded-For and
// Forwarded headers: from a peer that is not a trusted proxy they are
// limited as that peer, however the headers rotate; from the trusted
// proxy the forwarded client counts.
func TestServeBelievesOnlyTrustedProxies(t *testing.T) {
	t.Parallel()
	const limit = 5
	// signIns sends n sign-ins from source, each claiming another
	// client, and returns their statuses.
	signIns := func(t *testing.T, base, source string, n int) []int {
		t.Helper()
		c := xcloaktest.Client(t, source)
		var statuses []int
		for i := range n {
			body, _ := json.Marshal(map[string]string{"email": fmt.Sprintf("user%d@example.com", i), "password": "a wrong guess"})
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/api/v1/login", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i))
			req.Header.Set("Forwarded", fmt.Sprintf("for=203.0.113.%d", i))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			statuses = append(statuses, resp.StatusCode)
		}
		return statuses
	}
	limitedAsOne := fmt.Sprint([]int{401, 401, 401, 401, 401, 429, 429, 429})
	eachItsOwn := fmt.Sprint([]int{401, 401, 401, 401, 401, 401, 401, 401})

	t.Run("no trusted proxies", func(t *testing.T) {
		t.Parallel()
		vars := storeSettings(t)
		vars["XCLOAK_LIMIT_LOGIN_IP"] = fmt.Sprintf("%d/10m", limit)
		srv := startServe(t, vars)
		if got := fmt.Sprint(signIns(t, srv.base, "127.0.0.1", 8)); got != limitedAsOne {
			t.Errorf("statuses %s, want %s: headers from an untrusted peer were believed", got, limitedAsOne)
		}
	})
	t.Run("trusted proxy elsewhere", func(t *testing.T) {
		t.Parallel()
		vars := storeSettings(t)
		vars["XCLOAK_LIMIT_LOGIN_IP"] = fmt.Sprintf("%d/10m", limit)
		vars["XCLOAK_TRUSTED_PROXIES"] = "127.0.0.2"
		srv := startServe(t, vars)
		if got := fmt.Sprint(signIns(t, srv.base, "127.0.0.1", 8)); got != limitedAsOne {
			t.Errorf("from 127.0.0.1: statuses %s, want %s: headers from an untrusted peer were believed", got, limitedAsOne)
		}
		if got := fmt.Sprint(signIns(t, srv.base, "127.0.0.2", 8)); got != eachItsOwn {
			t.Errorf("from the trusted 127.0.0.2: statuses %s, want %s: the forwarded clients were not believed", got, eachItsOwn)
		}
	})
	t.Run("trusted proxy, no header read", func(t *testing.T) {
		t.Parallel()
		vars := storeSettings(t)
		vars["XCLOAK_LIMIT_LOGIN_IP"] = fmt.Sprintf("%d/10m", limit)
		vars["XCLOAK_TRUSTED_PROXIES"] = "127.0.0.2"
		vars["XCLOAK_FORWARDED_HEADER"] = "none"
		srv := startServe(t, vars)
		if got := fmt.Sprint(signIns(t, srv.base, "127.0.0.2", 8)); got != limitedAsOne {
			t.Errorf("statuses %s, want %s: a header was believed under XCLOAK_FORWARDED_HEADER=none", got, limitedAsOne)
		}
	})
}
