package web_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/web"
)

// The test's proxy is 127.0.0.2; 127.0.0.3 is a client that is not one.
const (
	proxyAddr    = "127.0.0.2"
	notProxyAddr = "127.0.0.3"
)

// authzEnv is an XCloak whose trusted proxy is proxyAddr, guarding
// app.example.test and, for administrators, admin.example.test.
func authzEnv(t *testing.T) (*xcloaktest.Env, string) {
	t.Helper()
	env := xcloaktest.New(t, xcloaktest.Options{Web: func(c *webConfig) {
		c.TrustedProxies = mustPrefixes(t, proxyAddr)
		c.ProtectedHosts = mustHosts(t, "app.example.test, *.apps.example.test, admin.example.test=admin")
	}})
	return env, env.Start(t)
}

// sessionToken signs in and returns the session cookie's value.
func sessionToken(t *testing.T, base, email, password string) string {
	t.Helper()
	resp, body := post(t, xcloaktest.Client(t, "127.0.0.9"), base+"/api/v1/login", jsonType, loginJSON(email, password))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in of %s: %d %s", email, resp.StatusCode, body)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "xcloak_session" {
			return c.Value
		}
	}
	t.Fatal("no session cookie")
	return ""
}

// forwardAuth asks the forward-auth endpoint from source about a request
// for proto://host+uri, with the session token (if any).
func forwardAuth(t *testing.T, base, source, token string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v1/authz/forward-auth", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Cookie", "xcloak_session="+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, _ := do(t, xcloaktest.Client(t, source), req)
	return resp
}

func forwarded(proto, host, uri string) []string {
	return []string{"X-Forwarded-Method", "GET", "X-Forwarded-Proto", proto, "X-Forwarded-Host", host, "X-Forwarded-Uri", uri}
}

func authRequest(t *testing.T, base, source, token, original string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v1/authz/auth-request", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Cookie", "xcloak_session="+token)
	}
	if original != "" {
		req.Header.Set("X-Original-URL", original)
	}
	resp, _ := do(t, xcloaktest.Client(t, source), req)
	return resp
}

func wantIdentity(t *testing.T, what string, resp *http.Response, user, groups string) {
	t.Helper()
	h := resp.Header
	if resp.StatusCode != http.StatusOK || h.Get("Remote-User") != user || h.Get("Remote-Email") != user || h.Get("Remote-Groups") != groups {
		t.Errorf("%s: %d Remote-User=%q Remote-Email=%q Remote-Groups=%q; want 200 %s, groups %q",
			what, resp.StatusCode, h.Get("Remote-User"), h.Get("Remote-Email"), h.Get("Remote-Groups"), user, groups)
	}
	if _, ok := h["Remote-Groups"]; !ok {
		t.Errorf("%s: no Remote-Groups header", what)
	}
	if h.Get("Cache-Control") != "no-store" {
		t.Errorf("%s: Cache-Control %q, want no-store", what, h.Get("Cache-Control"))
	}
}

func TestForwardAuth(t *testing.T) {
	env, base := authzEnv(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	env.AddUser(t, "root@example.com", "battery staple", true)
	ann := sessionToken(t, base, "ann@example.com", "correct horse")
	root := sessionToken(t, base, "root@example.com", "battery staple")

	app := forwarded("https", "app.example.test", "/docs?page=2")
	wantIdentity(t, "ann on app", forwardAuth(t, base, proxyAddr, ann, app...), "ann@example.com", "")
	wantIdentity(t, "root on app", forwardAuth(t, base, proxyAddr, root, app...), "root@example.com", "admins")
	wantIdentity(t, "ann on a wildcard's host, with a port", forwardAuth(t, base, proxyAddr, ann,
		forwarded("https", "Wiki.Apps.Example.Test:8443", "/")...), "ann@example.com", "")
	wantIdentity(t, "root on the admins' host", forwardAuth(t, base, proxyAddr, root,
		forwarded("https", "admin.example.test", "/")...), "root@example.com", "admins")

	// No session, or one that is no session: to the sign-in page, with rd.
	wantLogin := "https://login.example.test/login?rd=" + url.QueryEscape("https://app.example.test/docs?page=2")
	for name, token := range map[string]string{
		"none": "", "garbage": "x", "well-formed but unknown": strings.Repeat("A", 43),
	} {
		resp := forwardAuth(t, base, proxyAddr, token, app...)
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != wantLogin || resp.Header.Get("Remote-User") != "" {
			t.Errorf("session %s: %d Location %q, want 302 to %s", name, resp.StatusCode, resp.Header.Get("Location"), wantLogin)
		}
	}
	// A URI that is no plain path still sends to the host's root.
	resp := forwardAuth(t, base, proxyAddr, "", forwarded("https", "app.example.test", "/a b\\é")...)
	if want := "https://login.example.test/login?rd=" + url.QueryEscape("https://app.example.test/"); resp.Header.Get("Location") != want {
		t.Errorf("odd URI: Location %q, want %q", resp.Header.Get("Location"), want)
	}

	// Refusals: 403, never the identity.
	for _, c := range []struct {
		name, source, token string
		header              []string
	}{
		{"a client that is no trusted proxy", notProxyAddr, ann, app},
		{"no forwarded headers", proxyAddr, ann, nil},
		{"no host", proxyAddr, ann, []string{"X-Forwarded-Proto", "https", "X-Forwarded-Uri", "/"}},
		{"no scheme", proxyAddr, ann, []string{"X-Forwarded-Host", "app.example.test", "X-Forwarded-Uri", "/"}},
		{"a scheme not http", proxyAddr, ann, forwarded("javascript", "app.example.test", "/")},
		{"an unprotected host", proxyAddr, ann, forwarded("https", "evil.example.test", "/")},
		{"a wildcard's bare suffix", proxyAddr, ann, forwarded("https", "apps.example.test", "/")},
		{"a lookalike host", proxyAddr, ann, forwarded("https", "app.example.test.evil.example", "/")},
		{"a host with userinfo", proxyAddr, ann, forwarded("https", "evil@app.example.test", "/")},
		{"two hosts", proxyAddr, ann, append(forwarded("https", "app.example.test", "/"), "X-Forwarded-Host", "evil.example")},
		{"a host list", proxyAddr, ann, forwarded("https", "app.example.test, evil.example", "/")},
		{"a host in brackets", proxyAddr, ann, forwarded("https", "[app.example.test]:443", "/")},
		{"the admins' host for a non-admin", proxyAddr, ann, forwarded("https", "admin.example.test", "/")},
		{"an unprotected host without a session", proxyAddr, "", forwarded("https", "evil.example.test", "/")},
		{"no trusted proxy, without a session", notProxyAddr, "", app},
	} {
		resp := forwardAuth(t, base, c.source, c.token, c.header...)
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Remote-User") != "" {
			t.Errorf("%s: %d Remote-User %q, want 403", c.name, resp.StatusCode, resp.Header.Get("Remote-User"))
		}
	}
}

func TestAuthRequest(t *testing.T) {
	env, base := authzEnv(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	ann := sessionToken(t, base, "ann@example.com", "correct horse")

	wantIdentity(t, "ann on app", authRequest(t, base, proxyAddr, ann, "https://app.example.test/docs?page=2"), "ann@example.com", "")
	resp := authRequest(t, base, proxyAddr, "", "https://app.example.test/docs?page=2&x=1")
	wantLogin := "https://login.example.test/login?rd=" + url.QueryEscape("https://app.example.test/docs?page=2&x=1")
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Location") != wantLogin {
		t.Errorf("no session: %d Location %q, want 401 with %s", resp.StatusCode, resp.Header.Get("Location"), wantLogin)
	}
	for name, c := range map[string]struct{ source, original string }{
		"no trusted proxy":    {notProxyAddr, "https://app.example.test/"},
		"no URL":              {proxyAddr, ""},
		"a relative URL":      {proxyAddr, "/docs"},
		"an unprotected host": {proxyAddr, "https://evil.example.test/"},
		"userinfo":            {proxyAddr, "https://app.example.test@evil.example.test/"},
		"userinfo before":     {proxyAddr, "https://evil@app.example.test/"},
		"admins only":         {proxyAddr, "https://admin.example.test/"},
		"another scheme":      {proxyAddr, "ftp://app.example.test/"},
	} {
		if resp := authRequest(t, base, c.source, ann, c.original); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Remote-User") != "" {
			t.Errorf("%s: %d, want 403", name, resp.StatusCode)
		}
	}
}

// TestAuthRequestLongURL: only the host decides, so a page whose URL is
// longer than rd may be (a long query, as search and dashboard pages
// have) passes nginx as it passes the other proxies, whose long
// X-Forwarded-Uri counts as "/"; without a session, the browser comes back
// to the host's root.
func TestAuthRequestLongURL(t *testing.T) {
	env, base := authzEnv(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	ann := sessionToken(t, base, "ann@example.com", "correct horse")

	long := "https://app.example.test/search?q=" + strings.Repeat("a", 3000)
	wantIdentity(t, "ann on a long URL", authRequest(t, base, proxyAddr, ann, long), "ann@example.com", "")
	wantIdentity(t, "ann on a long forwarded URI", forwardAuth(t, base, proxyAddr, ann,
		forwarded("https", "app.example.test", "/search?q="+strings.Repeat("a", 3000))...), "ann@example.com", "")

	resp := authRequest(t, base, proxyAddr, "", long)
	wantLogin := "https://login.example.test/login?rd=" + url.QueryEscape("https://app.example.test/")
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Location") != wantLogin {
		t.Errorf("no session: %d Location %q, want 401 with %s", resp.StatusCode, resp.Header.Get("Location"), wantLogin)
	}
	// A URL rd could not name (a backslash, non-ASCII) comes back to the
	// host's root too, as such an X-Forwarded-Uri does.
	for _, odd := range []string{"https://app.example.test/a\\b", "https://app.example.test/caf\xc3\xa9"} {
		resp := authRequest(t, base, proxyAddr, "", odd)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Location") != wantLogin {
			t.Errorf("%q without a session: %d Location %q, want 401 with %s", odd, resp.StatusCode, resp.Header.Get("Location"), wantLogin)
		}
	}
	// A long URL of another host is still refused.
	if resp := authRequest(t, base, proxyAddr, ann, "https://evil.example.test/?q="+strings.Repeat("a", 3000)); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a long URL of an unprotected host: %d, want 403", resp.StatusCode)
	}
	if resp := authRequest(t, base, proxyAddr, ann, "https://app.example.test@evil.example.test/?q="+strings.Repeat("a", 3000)); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a long URL with userinfo: %d, want 403", resp.StatusCode)
	}
}

// TestForwardAuthLongURLComesBackToRoot: a forwarded URI within the bound
// whose whole URL, with the scheme and the host, is longer than rd may be
// sends the browser to the host's root, as a long X-Original-URL does,
// not to an rd the sign-in page would refuse for /account.
func TestForwardAuthLongURLComesBackToRoot(t *testing.T) {
	_, base := authzEnv(t)
	uri := "/search?q=" + strings.Repeat("a", 2030)
	resp := forwardAuth(t, base, proxyAddr, "", forwarded("https", "app.example.test", uri)...)
	wantLogin := "https://login.example.test/login?rd=" + url.QueryEscape("https://app.example.test/")
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != wantLogin {
		t.Errorf("no session: %d Location %.120q, want 302 to %s", resp.StatusCode, resp.Header.Get("Location"), wantLogin)
	}
}

// TestForwardAuthPasswordChangeRequired: a session that may only change
// its password passes no proxy; the sign-in page sends it to change it.
func TestForwardAuthPasswordChangeRequired(t *testing.T) {
	env, base := authzEnv(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	ann := sessionToken(t, base, "ann@example.com", "correct horse")
	if _, err := env.DB.Exec(t.Context(), `UPDATE sessions SET must_change_password = true`); err != nil {
		t.Fatal(err)
	}
	resp := forwardAuth(t, base, proxyAddr, ann, forwarded("https", "app.example.test", "/")...)
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), "https://login.example.test/login?rd=") {
		t.Errorf("forward-auth: %d %s, want 302 to sign in", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := authRequest(t, base, proxyAddr, ann, "https://app.example.test/"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("auth-request: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/login?rd="+url.QueryEscape("https://app.example.test/"), nil)
	req.Header.Set("Cookie", "xcloak_session="+ann)
	resp, _ = do(t, xcloaktest.Client(t, "127.0.0.9"), req)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account/password" {
		t.Errorf("/login?rd=: %d %s, want 303 to /account/password", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestCookieDomain: with a cookie domain, the session cookie is issued for
// it as __Secure- (a __Host- cookie cannot name a domain) and
// forward-auth reads it; device cookies stay host-only __Host- ones.
func TestCookieDomainSession(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Web: func(c *webConfig) {
		c.InsecureCookies = false
		c.TrustedProxies = mustPrefixes(t, proxyAddr)
		c.ProtectedHosts = mustHosts(t, "*.example.test")
		c.CookieDomain = "example.test"
	}})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	resp, _ := post(t, xcloaktest.Client(t, "127.0.0.9"), base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "correct horse"))
	var token string
	for _, c := range resp.Cookies() {
		switch {
		case c.Name == "__Secure-xcloak_session":
			token = c.Value
			if c.Domain != "example.test" || !c.Secure || !c.HttpOnly || c.Path != "/" || c.SameSite != http.SameSiteLaxMode {
				t.Errorf("session cookie: domain=%q secure=%v httponly=%v path=%q samesite=%v", c.Domain, c.Secure, c.HttpOnly, c.Path, c.SameSite)
			}
		case strings.HasPrefix(c.Name, "__Host-xcloak_"):
			if c.Domain != "" || !c.Secure {
				t.Errorf("device cookie %s: domain=%q secure=%v, want host-only and Secure", c.Name, c.Domain, c.Secure)
			}
		default:
			t.Errorf("unexpected cookie %s", c.Name)
		}
	}
	if token == "" {
		t.Fatalf("no __Secure- session cookie in %v", resp.Cookies())
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v1/authz/forward-auth", nil)
	req.Header.Set("Cookie", "__Secure-xcloak_session="+token)
	for _, h := range [][2]string{{"X-Forwarded-Proto", "https"}, {"X-Forwarded-Host", "wiki.example.test"}, {"X-Forwarded-Uri", "/"}} {
		req.Header.Set(h[0], h[1])
	}
	got, _ := do(t, xcloaktest.Client(t, proxyAddr), req)
	wantIdentity(t, "forward-auth with the domain's cookie", got, "ann@example.com", "")

	// Signing out clears the cookie for the same domain.
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/logout", nil)
	req.Header.Set("Cookie", "__Secure-xcloak_session="+token)
	out, _ := do(t, xcloaktest.Client(t, "127.0.0.9"), req)
	cleared := false
	for _, c := range out.Cookies() {
		cleared = cleared || c.Name == "__Secure-xcloak_session" && c.Domain == "example.test" && c.MaxAge < 0
	}
	if !cleared {
		t.Errorf("sign-out's cookies %v: the domain's session cookie not cleared", out.Cookies())
	}
}

// TestForwardAuthAccessLog: a proxy asks about every request of every
// protected application, so forward-auth's answers stay out of the access
// log at info; its refusals do not.
func TestForwardAuthAccessLog(t *testing.T) {
	env, base := authzEnv(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	ann := sessionToken(t, base, "ann@example.com", "correct horse")
	var buf syncBuffer
	h := web.NewServer(env.Web, env.Service, env.Dashboard, nil, slog.New(slog.NewJSONHandler(&buf, nil)))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	app := forwarded("https", "app.example.test", "/")
	if resp := forwardAuth(t, srv.URL, proxyAddr, ann, app...); resp.StatusCode != http.StatusOK {
		t.Fatalf("forward-auth: %d", resp.StatusCode)
	}
	if resp := forwardAuth(t, srv.URL, proxyAddr, "", app...); resp.StatusCode != http.StatusFound {
		t.Fatalf("forward-auth without a session: %d", resp.StatusCode)
	}
	if got := buf.String(); got != "" {
		t.Errorf("answers logged at info:\n%s", got)
	}
	if resp := forwardAuth(t, srv.URL, proxyAddr, ann, forwarded("https", "evil.example.test", "/")...); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("unprotected host: %d", resp.StatusCode)
	}
	if got := buf.String(); !strings.Contains(got, `"status":403`) {
		t.Errorf("a refusal is not logged: %q", got)
	}
}

// syncBuffer is a bytes.Buffer a handler may write from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAuthzOnlyAtItsOwnPath: the checks answer only at their paths as
// written. A proxy that keeps clients from them by the path they send
// (HAProxy's path_beg compares it undecoded) would let
// /api/v1/auth%7A/forward-auth through, which the mux decodes into the
// route: a client could then ask, with headers of its own, which hosts
// are protected and who it is on each.
func TestAuthzOnlyAtItsOwnPath(t *testing.T) {
	env, base := authzEnv(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	ann := sessionToken(t, base, "ann@example.com", "correct horse")
	for _, path := range []string{"/api/v1/auth%7A/forward-auth", "/api/v1/authz/forward%2Dauth", "/api/v1/%61uthz/auth-request", "/api/v1/authz/auth-reques%74"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Cookie", "xcloak_session="+ann)
		req.Header.Set("X-Original-URL", "https://app.example.test/")
		h := forwarded("https", "app.example.test", "/")
		for i := 0; i+1 < len(h); i += 2 {
			req.Header.Add(h[i], h[i+1])
		}
		resp, body := do(t, xcloaktest.Client(t, proxyAddr), req)
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Remote-User") != "" {
			t.Errorf("GET %s from the proxy: %d Remote-User=%q, want 404 and no identity", path, resp.StatusCode, resp.Header.Get("Remote-User"))
		}
		// The API's own 404, as for any other path of it it has no route for.
		if resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(body, `"error":"not_found"`) {
			t.Errorf("GET %s: %s %q, want the API's JSON not_found", path, resp.Header.Get("Content-Type"), body)
		}
	}
	// At their own paths they answer.
	wantIdentity(t, "forward-auth", forwardAuth(t, base, proxyAddr, ann, forwarded("https", "app.example.test", "/")...), "ann@example.com", "")
	wantIdentity(t, "auth-request", authRequest(t, base, proxyAddr, ann, "https://app.example.test/"), "ann@example.com", "")
}

// TestAuthzNonASCIIHost: a host of bytes past ASCII is no DNS name and
// matches no protected pattern, even one it would spell once lowered by
// Unicode's rules ("İ" is "i" there, the Kelvin sign "k"): the proxy,
// which matched it against names of its own, serves some other block.
func TestAuthzNonASCIIHost(t *testing.T) {
	env, base := authzEnv(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	ann := sessionToken(t, base, "ann@example.com", "correct horse")

	for _, host := range []string{
		"w\u0130ki.apps.example.test",        // lowers to wiki.apps.example.test
		"\u212Aey.apps.example.test",         // the Kelvin sign lowers to k
		"adm\u0130n.example.test",            // lowers to the =admin host
		"app.example.test\u0130",             // lowers to app.example.testi
		"w\u0130ki.apps.example.test:8443",   // with a port
		"\u212A\u212A.apps.example.test:443", // two of them
	} {
		if resp := authRequest(t, base, proxyAddr, ann, "https://"+host+"/"); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Remote-User") != "" {
			t.Errorf("X-Original-URL of %q: %d Remote-User %q, want 403", host, resp.StatusCode, resp.Header.Get("Remote-User"))
		}
		if resp := forwardAuth(t, base, proxyAddr, ann, forwarded("https", host, "/")...); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Remote-User") != "" {
			t.Errorf("X-Forwarded-Host %q: %d Remote-User %q, want 403", host, resp.StatusCode, resp.Header.Get("Remote-User"))
		}
	}
}
