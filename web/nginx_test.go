package web_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestNginxSnippetFromDeploy runs a real nginx with the location block
// docs/DEPLOY.md gives, in front of an XCloak that trusts it, and sends
// sign-ins carrying invented Forwarded and X-Forwarded-For headers: they
// are limited as the one client nginx saw. Skipped where nginx is not
// installed.
func TestNginxSnippetFromDeploy(t *testing.T) {
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx is not installed")
	}
	env := xcloaktest.New(t, xcloaktest.Options{
		Web: func(c *webConfig) { c.TrustedProxies = mustPrefixes(t, "127.0.0.1") },
	})
	base := env.Start(t)

	doc, err := os.ReadFile("../docs/DEPLOY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```nginx\n")
	snippet, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 || !strings.Contains(snippet, "http://xcloak:8080") {
		t.Fatal("docs/DEPLOY.md has no nginx block proxying to http://xcloak:8080")
	}
	snippet = strings.ReplaceAll(snippet, "http://xcloak:8080", base)

	dir := t.TempDir()
	port := freePort(t)
	conf := fmt.Sprintf(`pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events {}
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    server {
        listen 127.0.0.1:%[2]d;
%[3]s
    }
}
`, dir, port, snippet)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginx, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off; master_process off;")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	front := fmt.Sprintf("http://127.0.0.1:%d", port)
	// Wait for nginx to listen; the deadline only keeps a broken nginx
	// from hanging the test.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			errLog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx does not listen: %v\n%s", err, errLog)
		}
	}

	const client = "127.0.0.5"
	c := xcloaktest.Client(t, client)
	counts := map[int]int{}
	for i := range 70 {
		resp, body := post(t, c, front+"/api/v1/login", jsonType, loginJSON(fmt.Sprintf("user%d@example.com", i), "a wrong guess"),
			"Forwarded", fmt.Sprintf("for=198.51.100.%d", i),
			"X-Forwarded-For", fmt.Sprintf("10.%d.0.1, 192.0.2.%d", i, i))
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("sign-in %d through nginx: %d %s", i, resp.StatusCode, body)
		}
		counts[resp.StatusCode]++
	}
	limit := env.Auth.Limits.LoginIP.Count
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

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
