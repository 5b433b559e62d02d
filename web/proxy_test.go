package web_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/web"
)

// TestClientHeadersBehindProxy: behind a trusted proxy that appends the
// client to X-Forwarded-For, what the client itself writes in Forwarded
// or at the left of X-Forwarded-For gives it no new address. 70 sign-ins,
// each with an invented Forwarded and invented X-Forwarded-For entries,
// and the proxy's real entry last, are limited as the one real client:
// exactly the per-address limit gets through, and the events and the
// dashboard name only the real client.
func TestClientHeadersBehindProxy(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{
		Web: func(c *webConfig) { c.TrustedProxies = mustPrefixes(t, "127.0.0.1") },
	})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	const client = "203.0.113.7"

	proxy := xcloaktest.Client(t, "127.0.0.1")
	counts := map[int]int{}
	for i := range 70 {
		resp, body := post(t, proxy, base+"/api/v1/login", jsonType, loginJSON(fmt.Sprintf("user%d@example.com", i), fmt.Sprintf("wrong guess %d", i)),
			"Forwarded", fmt.Sprintf("for=198.51.100.%d", i),
			"X-Forwarded-For", fmt.Sprintf("10.%d.0.1, 192.0.2.%d, %s", i, i, client))
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("sign-in %d: %d %s", i, resp.StatusCode, body)
		}
		counts[resp.StatusCode]++
	}
	limit := env.Auth.Limits[auth.RuleLoginIP].Count
	if counts[http.StatusUnauthorized] != limit || counts[http.StatusTooManyRequests] != 70-limit {
		t.Errorf("answers %v; want exactly %d x 401 and %d x 429, as one client", counts, limit, 70-limit)
	}

	env.Flush(t)
	rows, err := env.DB.Query(t.Context(), `SELECT DISTINCT coalesce(ip, '') FROM security_events WHERE kind LIKE 'login_%' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	sources, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sources, []string{client}) {
		t.Errorf("sign-in events name %v, want only %s", sources, client)
	}

	// The administrator comes straight from an address that is no proxy.
	admin := xcloaktest.Client(t, "127.0.0.2")
	signIn(t, admin, base, adminEmail, anyPassword)
	s, _ := getStats(t, admin, base, "5m")
	if len(s.TopSources) != 1 || s.TopSources[0].Source != client || s.TopSources[0].Rejected != int64(70-limit) {
		t.Errorf("dashboard's top sources %+v, want only %s with %d rejections", s.TopSources, client, 70-limit)
	}
}

// TestProxyWritingTheOtherHeaderWarnedOnce: a trusted proxy that writes
// X-Forwarded-For to a service configured to read Forwarded makes every
// client the proxy itself, so that one client's limits refuse everyone.
// The service says so in its log, once, naming both headers, however
// many requests come that way.
func TestProxyWritingTheOtherHeaderWarnedOnce(t *testing.T) {
	var log lockedBuffer
	env := xcloaktest.New(t, xcloaktest.Options{
		Web: func(c *webConfig) {
			c.TrustedProxies = mustPrefixes(t, "127.0.0.1")
			c.ForwardedHeader = web.HeaderForwarded
		},
		Logger: slog.New(slog.NewJSONHandler(&log, nil)),
	})
	base := env.Start(t)
	proxy := xcloaktest.Client(t, "127.0.0.1")
	limit := env.Auth.Limits[auth.RuleLoginIP].Count
	limited := 0
	for i := range limit + 10 {
		resp, body := post(t, proxy, base+"/api/v1/login", jsonType, loginJSON(fmt.Sprintf("user%d@example.com", i), fmt.Sprintf("wrong guess %d", i)),
			"X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i))
		switch resp.StatusCode {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			limited++
		default:
			t.Fatalf("sign-in %d: %d %s", i, resp.StatusCode, body)
		}
	}
	if limited != 10 {
		t.Errorf("%d of %d sign-ins from as many clients limited, want 10: all of them count as the proxy", limited, limit+10)
	}

	log.mu.Lock()
	defer log.mu.Unlock()
	var warnings []map[string]any
	for l := range strings.Lines(log.buf.String()) {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line is not JSON: %v\n%s", err, l)
		}
		if line["sent_header"] != nil {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != 1 {
		t.Fatalf("%d requests through a proxy writing the other header: %d warnings, want one: %v", limit+10, len(warnings), warnings)
	}
	w := warnings[0]
	if w["level"] != "WARN" || w["configured_header"] != "Forwarded" || w["sent_header"] != "X-Forwarded-For" || w["proxy"] != "127.0.0.1" {
		t.Errorf("warning %v, want WARN naming Forwarded, X-Forwarded-For and the proxy 127.0.0.1", w)
	}
}
