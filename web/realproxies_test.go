package web_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestNginxSnippetFromDeploy runs a real nginx with the location block
// docs/DEPLOY.md gives, in front of an XCloak that trusts it, and sends
// sign-ins carrying invented Forwarded and X-Forwarded-For headers: they
// are limited as the one client nginx saw. Skipped where nginx is not
// installed.
func TestNginxSnippetFromDeploy(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{
		Web: func(c *webConfig) { c.TrustedProxies = mustPrefixes(t, "127.0.0.1") },
	})
	base := env.Start(t)

	snippet := strings.ReplaceAll(deploySnippet(t, "nginx", "http://xcloak:8080"), "http://xcloak:8080", base)
	port := testenv.Nginx(t, func(port int) string {
		return fmt.Sprintf("    server {\n        listen 127.0.0.1:%d;\n%s    }\n", port, snippet)
	})
	checkLimitedAsOne(t, env, fmt.Sprintf("http://127.0.0.1:%d", port), "127.0.0.5")
	checkAuthzHidden(t, fmt.Sprintf("http://127.0.0.1:%d", port))
}

// TestCaddySnippetFromDeploy does for the Caddyfile of docs/DEPLOY.md
// what TestNginxSnippetFromDeploy does for nginx, over plain http.
// Skipped where Caddy is not installed.
func TestCaddySnippetFromDeploy(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{
		Web: func(c *webConfig) { c.TrustedProxies = mustPrefixes(t, "127.0.0.1") },
	})
	base := env.Start(t)
	port := testenv.Caddy(t, func(port int) string {
		snippet := deploySnippet(t, "caddyfile", "xcloak:8080")
		snippet = strings.ReplaceAll(snippet, "login.example.com", fmt.Sprintf("http://127.0.0.1:%d", port))
		return strings.ReplaceAll(snippet, "xcloak:8080", strings.TrimPrefix(base, "http://"))
	})
	checkLimitedAsOne(t, env, fmt.Sprintf("http://127.0.0.1:%d", port), "127.0.0.5")
	checkAuthzHidden(t, fmt.Sprintf("http://127.0.0.1:%d", port))
}

// TestHAProxySnippetFromDeploy does for the HAProxy backend of
// docs/DEPLOY.md what TestNginxSnippetFromDeploy does for nginx, behind a
// plain http frontend. Skipped where HAProxy is not installed.
func TestHAProxySnippetFromDeploy(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{
		Web: func(c *webConfig) { c.TrustedProxies = mustPrefixes(t, "127.0.0.1") },
	})
	base := env.Start(t)
	snippet := deploySnippet(t, "haproxy", "10.0.0.21:8080")
	snippet = strings.ReplaceAll(snippet, "10.0.0.21:8080", strings.TrimPrefix(base, "http://"))
	port := testenv.HAProxy(t, func(port int) string {
		return fmt.Sprintf("defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n\n"+
			"frontend www\n    bind 127.0.0.1:%d\n    default_backend xcloak\n\n%s", port, snippet)
	})
	checkLimitedAsOne(t, env, fmt.Sprintf("http://127.0.0.1:%d", port), "127.0.0.5")
	checkAuthzHidden(t, fmt.Sprintf("http://127.0.0.1:%d", port))
}

// checkAuthzHidden checks that the proxy at front answers the authz
// endpoints itself, 404, for any client that asks: XCloak trusts the proxy,
// so through it a client's X-Original-URL or X-Forwarded-Host would be
// believed, and would tell which hosts are protected.
func checkAuthzHidden(t *testing.T, front string) {
	t.Helper()
	c := xcloaktest.Client(t, "127.0.0.6")
	for _, path := range []string{"/api/v1/authz/auth-request", "/api/v1/authz/forward-auth", "/api/v1/authz/%61uth-request", "/API/v1/authz/auth-request"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, front+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Original-URL", "https://app.example.com/")
		req.Header.Set("X-Forwarded-Host", "app.example.com")
		resp, body := do(t, c, req)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s through the proxy: %d %.100s, want the proxy's 404", path, resp.StatusCode, body)
		}
	}
}

// deploySnippet returns the first block of docs/DEPLOY.md in the given
// language, which must mention want.
func deploySnippet(t *testing.T, lang, want string) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/DEPLOY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```"+lang+"\n")
	snippet, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 || !strings.Contains(snippet, want) {
		t.Fatalf("docs/DEPLOY.md has no %s block with %s", lang, want)
	}
	return snippet
}

// checkLimitedAsOne sends 70 sign-ins from client through the proxy at
// front, each with invented Forwarded and X-Forwarded-For headers, and
// checks that XCloak limited them as that one client and named it in the
// events.
func checkLimitedAsOne(t *testing.T, env *xcloaktest.Env, front, client string) {
	t.Helper()
	c := xcloaktest.Client(t, client)
	counts := map[int]int{}
	for i := range 70 {
		resp, body := post(t, c, front+"/api/v1/login", jsonType, loginJSON(fmt.Sprintf("user%d@example.com", i), fmt.Sprintf("wrong guess %d", i)),
			"Forwarded", fmt.Sprintf("for=198.51.100.%d", i),
			"X-Forwarded-For", fmt.Sprintf("10.%d.0.1, 192.0.2.%d", i, i))
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("sign-in %d through nginx: %d %s", i, resp.StatusCode, body)
		}
		counts[resp.StatusCode]++
	}
	limit := env.Auth.Limits[auth.RuleLoginIP].Count
	if counts[http.StatusUnauthorized] != limit || counts[http.StatusTooManyRequests] != 70-limit {
		t.Errorf("answers through nginx %v; want exactly %d x 401 and %d x 429, as one client", counts, limit, 70-limit)
	}
	env.Flush(t)
	var sources []string
	rows, err := env.DB.Query(t.Context(), `SELECT DISTINCT coalesce(ip, '') FROM security_events WHERE kind LIKE 'login_%'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		sources = append(sources, s)
	}
	if rows.Err() != nil || len(sources) != 1 || sources[0] != client {
		t.Errorf("sign-in events name %v (%v), want only %s", sources, rows.Err(), client)
	}
}
