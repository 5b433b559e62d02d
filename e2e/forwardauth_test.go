package e2e

import (
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/web"
)

// The names of the forward-auth journeys. Chromium resolves every
// *.xcloak.test name to 127.0.0.1 (chromiumArgs), where one proxy serves
// them all on one port: XCloak at authHost, the protected application at
// appHost. The proxy sends unlistedHost and adminHost to the application
// too, behind XCloak's check, but XCloak lists only appHost, and adminHost
// for administrators.
const (
	cookieDomain = "xcloak.test"
	authHost     = "auth.xcloak.test"
	appHost      = "app.xcloak.test"
	unlistedHost = "other.xcloak.test"
	adminHost    = "admin.xcloak.test"
)

// TestForwardAuthNginx runs the journey behind a real nginx configured
// with the nginx block of docs/INTEGRATION.md (auth_request, and
// error_page 401 for the sign-in redirect).
func TestForwardAuthNginx(t *testing.T) {
	forwardAuthJourney(t, len(foreignReturns(0)), func(t *testing.T, xcloak, app string) int {
		return testenv.Nginx(t, func(port int) string {
			conf := integrationConfig(t, "nginx")
			conf = mustReplace(t, conf, "listen 443 ssl;", fmt.Sprintf("listen 127.0.0.1:%d;", port))
			conf = dropLines(conf, "ssl_certificate")
			conf = mustReplace(t, conf, "auth.example.com", authHost)
			conf = mustReplace(t, conf, "app.example.com", strings.Join([]string{appHost, unlistedHost, adminHost}, " "))
			conf = mustReplace(t, conf, "http://xcloak:8080", "http://"+xcloak)
			return mustReplace(t, conf, "http://app:3000", "http://"+app)
		})
	})
}

// TestForwardAuthCaddy runs the journey behind a real Caddy configured
// with the Caddyfile of docs/INTEGRATION.md (forward_auth), over plain
// http. The proxy has no part in where /login and /logout send the
// browser, so only the first two foreign rd values are tried again here.
func TestForwardAuthCaddy(t *testing.T) {
	forwardAuthJourney(t, 2, func(t *testing.T, xcloak, app string) int {
		return testenv.Caddy(t, func(port int) string {
			site := func(host string) string { return fmt.Sprintf("http://%s:%d", host, port) }
			conf := integrationConfig(t, "caddyfile")
			conf = mustReplace(t, conf, "auth.example.com", site(authHost))
			conf = mustReplace(t, conf, "app.example.com", strings.Join([]string{site(appHost), site(unlistedHost), site(adminHost)}, ", "))
			conf = mustReplace(t, conf, "xcloak:8080", xcloak)
			return mustReplace(t, conf, "app:3000", app)
		})
	})
}

// forwardAuthJourney puts the proxy that front starts in front of XCloak
// and a test application, and walks a browser through them: a visit to a
// page of the application is sent to sign in, comes back to that very
// page after signing in, and the application sees who it is; identity
// headers a client writes itself never reach the application; a host
// XCloak does not list, or lists for administrators only, is refused
// through the proxy, while an administrator passes there with the admins
// group; signing out through /logout?rd= sends the browser to sign in
// again; and foreign rd values on /login and /logout land on XCloak's own
// pages. front gets the addresses of XCloak and of the application and
// returns the proxy's port; tries is how many of foreignReturns to try.
func forwardAuthJourney(t *testing.T, tries int, front func(t *testing.T, xcloak, app string) int) {
	const email, password = "ada@example.com", "correct horse battery"
	site := startProxiedSite(t, front)
	site.env.AddUser(t, email, password, false)
	page := newPage(t, "browser", desktop)
	// A query with & and + and an escape, which rd must carry exactly.
	const askedPath = "/some/page?x=1&y=a+b%2Fc"
	asked := site.app + askedPath

	t.Run("sign in and come back", func(t *testing.T) {
		open(t, page, asked)
		wantSignInFor(t, page, site, asked)
		// A wrong password first: the same answer as on XCloak's own page,
		// and the form still knows where to go back to.
		fill(t, page, "email", email)
		fill(t, page, "password", "not the password")
		press(t, page, "Sign in")
		wantText(t, page, "main [role=alert]", wrongPasswordText)
		fill(t, page, "password", password)
		press(t, page, "Sign in")
		wantURL(t, page, asked)
		wantText(t, page, "#identity", "Remote-Email="+email+" Remote-User="+email)
		wantText(t, page, "#page", askedPath)
	})
	session := sessionCookie(t, page)
	if session == "" {
		t.Fatal("signed in without a session cookie")
	}

	t.Run("forged identity headers", func(t *testing.T) {
		forged := []string{
			"Remote-User", "mallory@example.com", "Remote-Email", "mallory@example.com", "Remote-Groups", "admins",
			"Remote_User", "mallory@example.com", "Remote_Email", "mallory@example.com", "Remote_Groups", "admins",
		}
		status, body := site.get(t, appHost, "/forged", session, forged...)
		if status != http.StatusOK || !strings.Contains(body, `<p id="identity">Remote-Email=`+email+` Remote-User=`+email+`</p>`) {
			t.Errorf("signed in with forged headers: %d %s; want 200 and only XCloak's identity", status, body)
		}
		if status, body := site.get(t, appHost, "/forged", "", forged...); status != http.StatusFound {
			t.Errorf("signed out with forged headers: %d %s; want 302 to sign in", status, body)
		}
		for _, seen := range site.seen.all() {
			if strings.Contains(seen, "/forged") && (strings.Contains(seen, "mallory") || strings.Contains(seen, "admins")) {
				t.Errorf("the application received a forged header: %s", seen)
			}
		}
	})

	// Through the proxy, XCloak's own host does not answer the checks: a
	// client asking them there would have its own forwarded URL believed.
	t.Run("the checks are the proxy's alone", func(t *testing.T) {
		for _, path := range []string{"/api/v1/authz/auth-request", "/api/v1/authz/forward-auth"} {
			status, body := site.get(t, authHost, path, session,
				"X-Original-URL", site.app+"/", "X-Forwarded-Host", appHost, "X-Forwarded-Uri", "/", "X-Forwarded-Proto", "http")
			if status != http.StatusNotFound {
				t.Errorf("%s on %s through the proxy: %d %s; want 404", path, authHost, status, body)
			}
		}
	})

	t.Run("hosts XCloak refuses", func(t *testing.T) {
		for _, host := range []string{unlistedHost, adminHost} {
			if status, body := site.get(t, host, "/", session); status != http.StatusForbidden {
				t.Errorf("%s through the proxy: %d %s; want 403", host, status, body)
			}
		}
		for _, seen := range site.seen.all() {
			if !strings.HasPrefix(seen, appHost+" ") {
				t.Errorf("the application received a request XCloak should have refused: %s", seen)
			}
		}
	})

	t.Run("administrators", func(t *testing.T) {
		const admin = "root@example.com"
		site.env.AddUser(t, admin, password, true)
		other := newPage(t, "administrator", desktop)
		tools := fmt.Sprintf("http://%s:%d/tools", adminHost, site.port)
		open(t, other, tools)
		wantSignInFor(t, other, site, tools)
		fill(t, other, "email", admin)
		fill(t, other, "password", password)
		press(t, other, "Sign in")
		wantURL(t, other, tools)
		wantText(t, other, "#identity", "Remote-Email="+admin+" Remote-Groups=admins Remote-User="+admin)
	})

	t.Run("sign out and sign in again", func(t *testing.T) {
		after := site.app + "/bye"
		open(t, page, site.auth+"/logout?rd="+url.QueryEscape(after))
		wantText(t, page, "main h1", "Sign out")
		if strings.Contains(t.Name(), "Nginx") {
			keepScreenshot(t, page, "signout")
		}
		press(t, page, "Sign out")
		wantSignInFor(t, page, site, after)
		if got := sessionCookie(t, page); got != "" {
			t.Errorf("session cookie after signing out = %q, want none", got)
		}
		if status, _ := site.get(t, appHost, "/", session); status != http.StatusFound {
			t.Errorf("the ended session through the proxy: %d; want 302 to sign in", status)
		}
	})

	// Each foreign rd is tried on the sign-in page, then on the sign-out
	// page; the browser must stay on XCloak. Signed in, a visit to
	// /login?rd= goes straight on, so that is tried too.
	t.Run("foreign rd", func(t *testing.T) {
		for _, rd := range foreignReturns(site.port)[:tries] {
			open(t, page, site.auth+"/login?rd="+url.QueryEscape(rd))
			wantURL(t, page, regexp.MustCompile(`^`+regexp.QuoteMeta(site.auth+"/login?")))
			fill(t, page, "email", email)
			fill(t, page, "password", password)
			press(t, page, "Sign in")
			wantURL(t, page, site.auth+"/account")

			open(t, page, site.auth+"/login?rd="+url.QueryEscape(rd))
			wantURL(t, page, site.auth+"/account")

			open(t, page, site.auth+"/logout?rd="+url.QueryEscape(rd))
			press(t, page, "Sign out")
			wantURL(t, page, site.auth+"/login")
		}
	})
}

// foreignReturns are rd values that must not take the browser off XCloak,
// for a proxy on port: other hosts, a scheme-relative URL, a script, a
// backslash, userinfo before a protected host, a protected host as a
// subdomain of another, and a percent-encoded URL. web/redirect_test.go
// has the whole table; these go through a real browser's URL handling.
func foreignReturns(port int) []string {
	return []string{
		"https://evil.example/",
		"//evil.example/",
		"javascript:alert(document.domain)",
		`http:\\evil.example\`,
		fmt.Sprintf("http://%s:%d@evil.example/", appHost, port),
		fmt.Sprintf("http://%s.evil.example:%d/", appHost, port),
		"http%3A%2F%2Fevil.example%2F",
	}
}

// proxiedSite is XCloak and a protected application behind one proxy.
type proxiedSite struct {
	env *xcloaktest.Env
	// port is the proxy's; auth and app are the base URLs of XCloak and of
	// the application through it.
	port      int
	auth, app string
	// seen lists what the application received.
	seen *identityLog
}

// startProxiedSite starts the application and the proxy, then XCloak on
// an address the proxy was given before it started (XCloak's public URL
// names the proxy's port, which is known only once the proxy listens). The
// XCloak trusts the proxy on 127.0.0.1, protects appHost and adminHost
// (for administrators) and issues its session cookie for cookieDomain.
func startProxiedSite(t *testing.T, front func(t *testing.T, xcloak, app string) int) *proxiedSite {
	t.Helper()
	s := &proxiedSite{seen: &identityLog{}}
	app := httptest.NewServer(s.seen)
	t.Cleanup(app.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Closed by the server below, or here if the test ends before it
	// starts.
	t.Cleanup(func() { _ = ln.Close() })
	s.port = front(t, ln.Addr().String(), app.Listener.Addr().String())
	s.auth = fmt.Sprintf("http://%s:%d", authHost, s.port)
	s.app = fmt.Sprintf("http://%s:%d", appHost, s.port)

	public, _ := url.Parse(s.auth)
	hosts, err := web.ParseProtectedHosts(appHost + "," + adminHost + "=admin")
	if err != nil {
		t.Fatal(err)
	}
	s.env = xcloaktest.New(t, xcloaktest.Options{
		Auth: func(c *auth.Config) { c.PublicURL = public },
		Web: func(c *web.Config) {
			trustLoopbackProxy(c)
			c.PublicURL = public
			c.ProtectedHosts = hosts
			c.CookieDomain = cookieDomain
		},
	})
	srv := httptest.NewUnstartedServer(s.env.Handler)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	s.env.URL = srv.URL
	return s
}

// get sends GET path to host through the proxy, with the session cookie
// when it is not empty and the given header names and values, and returns
// the status and body without following a redirect.
func (s *proxiedSite) get(t *testing.T, host, path, session string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", s.port, path), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = fmt.Sprintf("%s:%d", host, s.port)
	if session != "" {
		req.AddCookie(&http.Cookie{Name: "xcloak_session", Value: session})
	}
	for i := 0; i+1 < len(header); i += 2 {
		// Set as written: the underscore spellings are kept apart from
		// the dash ones.
		req.Header[header[i]] = append(req.Header[header[i]], header[i+1])
	}
	resp, err := xcloaktest.Client(t, "127.0.0.1").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// wantSignInFor waits for page to be XCloak's sign-in page with rd naming
// the page the browser asked for.
func wantSignInFor(t *testing.T, page playwright.Page, s *proxiedSite, asked string) {
	t.Helper()
	wantURL(t, page, regexp.MustCompile(`^`+regexp.QuoteMeta(s.auth+"/login?")))
	u, err := url.Parse(page.URL())
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Query().Get("rd"); got != asked {
		t.Errorf("sign-in page at %s has rd %q, want %q", page.URL(), got, asked)
	}
	wantText(t, page, "main h1", "Sign in")
}

// identityLog is the protected application: it answers every request
// with a page that shows the identity headers it received (#identity, as
// "Name=value" sorted by name) and the path it was asked for (#page), and
// remembers each request's host (without the port) and identity headers.
// A header without a value says nothing (a proxy may pass XCloak's empty
// Remote-Groups of a user in no group, or drop it) and is left out. Any header whose
// name reads as Remote-User, Remote-Email or Remote-Groups once
// underscores count as dashes is an identity header, as it is to
// applications that read headers through CGI-style variables
// (HTTP_REMOTE_USER).
type identityLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *identityLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var identity []string
	for name, values := range r.Header {
		switch strings.ReplaceAll(strings.ToLower(name), "_", "-") {
		case "remote-user", "remote-email", "remote-groups":
			for _, v := range values {
				if v != "" {
					identity = append(identity, name+"="+v)
				}
			}
		}
	}
	slices.Sort(identity)
	shown := strings.Join(identity, " ")
	l.mu.Lock()
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	l.seen = append(l.seen, host+" "+r.URL.RequestURI()+" "+shown)
	l.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!doctype html><title>Application</title><h1>hello</h1>"+
		`<p id="identity">%s</p><p id="page">%s</p>`, html.EscapeString(shown), html.EscapeString(r.URL.RequestURI()))
}

// all returns what the application received so far, one line a request:
// host, path and identity headers.
func (l *identityLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// integrationConfig returns the first block of docs/INTEGRATION.md in the
// given language: the proxy configuration a newcomer copies is the one the
// tests run.
func integrationConfig(t *testing.T, lang string) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/INTEGRATION.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```"+lang+"\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("docs/INTEGRATION.md has no %s block", lang)
	}
	return block
}

// mustReplace replaces every old in s with new, and fails the test when s
// has no old: the documented configuration changed shape and the test
// must follow it.
func mustReplace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("the documented configuration has no %q:\n%s", old, s)
	}
	return strings.ReplaceAll(s, old, new)
}

// dropLines removes the lines of s that contain substr.
func dropLines(s, substr string) string {
	lines := strings.Split(s, "\n")
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return strings.Contains(l, substr) }), "\n")
}

// TestHAProxyConfigChecks has HAProxy check the haproxy block of
// docs/INTEGRATION.md, which no test runs end to end: the auth-request Lua
// script it loads is not packaged, so a stand-in registers its action,
// and the listener drops TLS. Skipped where HAProxy is not installed.
func TestHAProxyConfigChecks(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed: run scripts/proxies.sh")
	}
	dir := t.TempDir()
	stub := filepath.Join(dir, "auth-request.lua")
	if err := os.WriteFile(stub, []byte(`core.register_action("auth-request", { "http-req" }, function(txn, backend, path) end, 2)`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := integrationConfig(t, "haproxy")
	conf = mustReplace(t, conf, "/usr/share/haproxy/auth-request.lua", stub)
	conf = mustReplace(t, conf, "bind :443 ssl crt /etc/haproxy/certs/", "bind 127.0.0.1:8443") // -c binds nothing
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(haproxy, "-c", "-f", path).CombinedOutput()
	if err != nil || strings.Contains(string(out), "[WARNING]") {
		t.Errorf("haproxy -c: %v\n%s", err, out)
	}
}
