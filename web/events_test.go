package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestMalformedSignInsAreLimited: malformed sign-ins, whether the body
// cannot be read or the fields are invalid, pass the per-network limit
// like any other, so a flood of them is answered 429 once it is spent.
func TestMalformedSignInsAreLimited(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginIP, 6) }})
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

// TestEventRowsBoundedPerNetwork: thousands of malformed sign-ins and
// sign-ins with a different email each, from one network, write at most a
// constant number of security-event rows per minute, and the counts in
// those rows, like the dashboard's figures, still add up to every request.
func TestEventRowsBoundedPerNetwork(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	const n = 5000
	var next atomic.Int64
	var mu sync.Mutex
	answers := map[int]int{}
	var wg sync.WaitGroup
	for range 4 {
		c := xcloaktest.Client(t, "127.0.42.1")
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				// A new guess each time: one password over many accounts
				// would be refused as sprayed, and this counts the network's.
				body := loginJSON(fmt.Sprintf("user%d@example.com", i), fmt.Sprintf("guess %d", i))
				switch i % 3 {
				case 1:
					body = loginJSON(fmt.Sprintf("not an address %d", i), "a guess")
				case 2:
					body = fmt.Sprintf(`{"email":%d}`, i)
				}
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/api/v1/login", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("Content-Type", jsonType)
				resp, err := c.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				mu.Lock()
				answers[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if answers[http.StatusTooManyRequests] != n-env.Auth.Limits[auth.RuleLoginIP].Count {
		t.Errorf("answers %v; want all but the first %d refused by the per-network limit", answers, env.Auth.Limits[auth.RuleLoginIP].Count)
	}
	env.Flush(t)

	var rows, counted, perMinute int
	err := env.DB.QueryRow(t.Context(), `
		SELECT coalesce(sum(rows), 0), coalesce(sum(counted), 0), coalesce(max(rows), 0) FROM (
			SELECT count(*) AS rows, sum(coalesce((detail->>'count')::int, 1)) AS counted
			FROM security_events GROUP BY ip, date_trunc('minute', at)
		) per_minute`).Scan(&rows, &counted, &perMinute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests from one network: %d rows, at most %d in one minute, counting %d", n, rows, perMinute, counted)
	if bound := auth.MaxEventRowsPerNetwork; perMinute > bound {
		t.Errorf("%d rows in one minute from one network; want at most %d", perMinute, bound)
	}
	if counted != n {
		t.Errorf("the rows count %d events; want every one of the %d requests", counted, n)
	}

	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.42.2")
	signIn(t, admin, base, adminEmail, anyPassword)
	env.Flush(t)
	if s, _ := getStats(t, admin, base, "1h"); s.Attempts != n+1 || s.Invalid+s.Failures+s.Rejected != n {
		t.Errorf("dashboard: %d attempts (%d invalid, %d failed, %d rejected); want %d and the %d requests", s.Attempts, s.Invalid, s.Failures, s.Rejected, n+1, n)
	}
}
