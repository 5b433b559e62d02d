package web_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// nginxAuthServer is a protected server block as docs/INTEGRATION.md gives
// it for nginx: %[1]s is the host, %[2]s the application, %[3]s XCloak.
const nginxAuthServer = `
    server {
        listen 127.0.0.1:%[4]d;
        server_name %[1]s;
        location / {
            auth_request /.xcloak/auth;
            auth_request_set $xcloak_user $upstream_http_remote_user;
            auth_request_set $xcloak_sign_in $upstream_http_location;
            error_page 401 =302 $xcloak_sign_in;
            proxy_pass %[2]s;
            proxy_set_header Remote-User $xcloak_user;
        }
        location = /.xcloak/auth {
            internal;
            proxy_pass %[3]s/api/v1/authz/auth-request;
            proxy_method GET;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Original-URL $scheme://$host:$server_port$request_uri;
        }
    }
`

// TestNginxAuthRequestAdminHostByAbsoluteURI: nginx picks the server block
// from the host of an absolute request target (GET http://admin.../ with
// Host: app...), while $http_host is the Host header: an X-Original-URL
// built from $http_host would have XCloak judge the host the client wrote
// in Host, not the one nginx serves. With the documented one ($host and
// $server_port), a signed-in account that is no administrator does not
// reach the =admin host's application.
func TestNginxAuthRequestAdminHostByAbsoluteURI(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Web: func(c *webConfig) {
		c.TrustedProxies = mustPrefixes(t, "127.0.0.1")
		c.ProtectedHosts = mustHosts(t, "app.example.test, admin.example.test=admin")
	}})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	ann := sessionToken(t, base, "ann@example.com", "correct horse")

	app := func(name string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s for %s", name, r.Header.Get("Remote-User"))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	plain, admin := app("plain application"), app("administrators' application")

	port := testenv.Nginx(t, func(port int) string {
		return fmt.Sprintf(`    server {
        listen 127.0.0.1:%[1]d;
        server_name login.example.test;
        location / { proxy_pass %[2]s; }
    }
%[3]s%[4]s`, port, base,
			fmt.Sprintf(nginxAuthServer, "app.example.test", plain, base, port),
			fmt.Sprintf(nginxAuthServer, "admin.example.test", admin, base, port))
	})

	send := func(target, host string) (int, string) {
		t.Helper()
		return rawGet(t, port, target, host, ann)
	}

	if status, body := send("/", "app.example.test"); status != http.StatusOK || !strings.Contains(body, "plain application for ann@example.com") {
		t.Fatalf("ann on the plain application: %d %q", status, body)
	}
	if status, body := send("/", "admin.example.test"); status != http.StatusForbidden {
		t.Fatalf("ann on the administrators' host: %d %q, want 403", status, body)
	}
	if status, body := send("http://admin.example.test/", "app.example.test"); status == http.StatusOK || strings.Contains(body, "administrators'") {
		t.Errorf("ann, no administrator, asking for http://admin.example.test/ with Host: app.example.test: %d %q; want refused", status, body)
	}
}

// TestNginxAuthRequestNonASCIIHost: nginx takes a Host of bytes past
// ASCII, and serves it from its default server block, since no
// server_name is spelled so; $host carries it into X-Original-URL as sent.
// "wİki" (a capital I with a dot) is no spelling of wiki.example.test, so
// XCloak must not judge it as that host: were it lowered into "wiki", a
// signed-in account that is no administrator would pass into the default
// block's application, here the administrators'.
func TestNginxAuthRequestNonASCIIHost(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Web: func(c *webConfig) {
		c.TrustedProxies = mustPrefixes(t, "127.0.0.1")
		c.ProtectedHosts = mustHosts(t, "wiki.example.test, admin.example.test=admin")
	}})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	ann := sessionToken(t, base, "ann@example.com", "correct horse")

	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "administrators' application for %s", r.Header.Get("Remote-User"))
	}))
	t.Cleanup(admin.Close)
	wiki := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "wiki for %s", r.Header.Get("Remote-User"))
	}))
	t.Cleanup(wiki.Close)

	port := testenv.Nginx(t, func(port int) string {
		listen := fmt.Sprintf("listen 127.0.0.1:%d;", port)
		adminBlock := strings.Replace(fmt.Sprintf(nginxAuthServer, "admin.example.test", admin.URL, base, port),
			listen, fmt.Sprintf("listen 127.0.0.1:%d default_server;", port), 1)
		return adminBlock + fmt.Sprintf(nginxAuthServer, "wiki.example.test", wiki.URL, base, port)
	})

	send := func(host string) (int, string) {
		t.Helper()
		return rawGet(t, port, "/", host, ann)
	}

	if status, body := send("wiki.example.test"); status != http.StatusOK || !strings.Contains(body, "wiki for ann@example.com") {
		t.Fatalf("ann on the wiki: %d %q", status, body)
	}
	if status, body := send("admin.example.test"); status != http.StatusForbidden {
		t.Fatalf("ann on the administrators' host: %d %q, want 403", status, body)
	}
	for _, host := range []string{"w\u0130ki.example.test", "W\u0130KI.example.test"} {
		if status, body := send(host); status == http.StatusOK || strings.Contains(body, "administrators'") {
			t.Errorf("ann, no administrator, with Host: %s: %d %q; want refused", host, status, body)
		}
	}
}

// rawGet sends GET target with the Host header host, written as it is
// (net/http would refuse or rewrite some), and the session cookie session,
// to the nginx on port, and returns the answer's status and body.
func rawGet(t *testing.T, port int, target, host, session string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nCookie: xcloak_session=%s\r\nConnection: close\r\n\r\n", target, host, session)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
