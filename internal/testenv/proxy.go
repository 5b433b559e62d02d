package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// StartProxy starts a proxy on a free loopback port and returns the port
// once it listens. start makes the command for a port and returns what the
// proxy logged so far. Ports are drawn below Linux's ephemeral range,
// which the tests' own connections use; a port taken meanwhile by another
// process is tried again with another. The deadline only keeps a broken
// proxy from hanging the test.
func StartProxy(t testing.TB, start func(port int) (*exec.Cmd, func() string)) int {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port := proxyPort(t)
		cmd, logs := start(port)
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = dieWithParent()
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err == nil {
				conn.Close()
				return port
			}
			select {
			case <-exited:
				if attempt < 5 && strings.Contains(strings.ToLower(logs()), "address already in use") {
					break
				}
				t.Fatalf("the proxy ended: %s", logs())
			default:
				if time.Now().After(deadline) {
					t.Fatalf("the proxy does not listen: %v\n%s", err, logs())
				}
				continue
			}
			break
		}
	}
}

// Nginx runs Debian's nginx in the foreground on a free loopback port and
// returns the port. servers returns, for that port, what goes inside the
// configuration's http block (its server blocks); Nginx adds the rest,
// with the pid file, the logs and the temporary files in the test's
// directory. The test is skipped where nginx is not installed
// (scripts/proxies.sh installs it).
func Nginx(t testing.TB, servers func(port int) string) int {
	t.Helper()
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx is not installed: run scripts/proxies.sh")
	}
	dir := t.TempDir()
	conf, errLog := filepath.Join(dir, "nginx.conf"), filepath.Join(dir, "error.log")
	return StartProxy(t, func(port int) (*exec.Cmd, func() string) {
		text := fmt.Sprintf(`pid %[1]s/nginx.pid;
error_log %[2]s;
events {}
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[3]s
}
`, dir, errLog, servers(port))
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(nginx, "-p", dir, "-e", errLog, "-c", conf, "-g", "daemon off; master_process off;")
		return cmd, func() string {
			b, _ := os.ReadFile(errLog)
			return string(b)
		}
	})
}

// Caddy runs Debian's Caddy in the foreground on a free loopback port and
// returns the port. sites returns, for that port, the Caddyfile's site
// blocks; Caddy adds the global options that keep it to itself: no admin
// endpoint, and its files in the test's directory. The test is skipped
// where Caddy is not installed (scripts/proxies.sh installs it).
func Caddy(t testing.TB, sites func(port int) string) int {
	t.Helper()
	caddy, err := exec.LookPath("caddy")
	if err != nil {
		t.Skip("caddy is not installed: run scripts/proxies.sh")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "Caddyfile")
	return StartProxy(t, func(port int) (*exec.Cmd, func() string) {
		text := "{\n\tadmin off\n\tstorage file_system " + dir + "\n}\n" + sites(port)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(caddy, "run", "--config", conf, "--adapter", "caddyfile")
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
		out := &LockedWriter{}
		cmd.Stdout, cmd.Stderr = out, out
		return cmd, out.String
	})
}

// HAProxy runs Debian's HAProxy in the foreground on a free loopback port
// and returns the port. config returns, for that port, the whole
// configuration. The test is skipped where HAProxy is not installed
// (scripts/proxies.sh installs it).
func HAProxy(t testing.TB, config func(port int) string) int {
	t.Helper()
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed: run scripts/proxies.sh")
	}
	conf := filepath.Join(t.TempDir(), "haproxy.cfg")
	return StartProxy(t, func(port int) (*exec.Cmd, func() string) {
		if err := os.WriteFile(conf, []byte(config(port)), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(haproxy, "-db", "-f", conf)
		out := &LockedWriter{}
		cmd.Stdout, cmd.Stderr = out, out
		return cmd, out.String
	})
}

// LockedWriter collects a process's output for the test to read while the
// process still writes it.
type LockedWriter struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (w *LockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *LockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// proxyPort returns a TCP port of 127.0.0.1 that was free a moment ago.
func proxyPort(t testing.TB) int {
	t.Helper()
	for range 100 {
		port := 23000 + rand.IntN(9000)
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatal("no free port in 23000-31999")
	return 0
}
