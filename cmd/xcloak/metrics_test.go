package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
)

func fetch(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMetricsEndpoint(t *testing.T) {
	vars := storeSettings(t)
	vars["XCLOAK_METRICS_ADDR"] = "main"
	// The new browser's notice would be a third limit decision, its mail
	// domain's, made when its worker gets to it.
	vars["XCLOAK_NOTIFY_NEW_DEVICE"] = "false"
	addUser(t, vars, "ann@example.com", "correct horse\n")
	s := startServe(t, vars)
	signIn(t, s.base, "ann@example.com", "correct horse")
	signIn(t, s.base, "ann@example.com", "wrong password")
	status, body := fetch(t, s.base+"/metrics")
	for _, want := range []string{"xcloak_signin_attempts_total 2", "xcloak_signin_successes_total 1", "xcloak_signin_failures_total 1",
		"xcloak_limiter_decision_seconds_count 2", `xcloak_redis_degraded{policy="local"} 0`, "xcloak_hashing_waiting 0", "xcloak_hashes_giving_way 0", "go_goroutines"} {
		if status != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics: %d, no %q", status, want)
		}
	}
	if strings.Contains(body, "correct horse") || strings.Contains(body, "ann@example.com") {
		t.Error("/metrics mentions a password or an account")
	}
}

func TestMetricsOnTheirOwnAddress(t *testing.T) {
	vars := storeSettings(t)
	vars["XCLOAK_METRICS_ADDR"] = "127.0.0.1:0"
	s := startServe(t, vars)
	url, ok := strings.CutPrefix(s.nextLine(t), "Metrics at ")
	if !ok {
		t.Fatal("serve did not print where the metrics are")
	}
	if status, body := fetch(t, url); status != 200 || !strings.Contains(body, "xcloak_signin_attempts_total") {
		t.Fatalf("%s: %d", url, status)
	}
	if status, _ := fetch(t, s.base+"/metrics"); status != http.StatusNotFound {
		t.Fatalf("main address still serves /metrics: %d", status)
	}
}

// TestLogsCarryRequestIDsAndNoSecrets: one JSON line per request with its
// ID, and no password, token or session cookie in any line.
func TestLogsCarryRequestIDsAndNoSecrets(t *testing.T) {
	vars := storeSettings(t)
	addUser(t, vars, "ann@example.com", "correct horse\n")
	s := startServe(t, vars)
	resp := signIn(t, s.base, "ann@example.com", "correct horse")
	session := ""
	for _, c := range resp.Cookies() {
		session += c.Value
	}
	id := resp.Header.Get("X-Request-ID")
	signIn(t, s.base, "ann@example.com", "hunter2 wrong guess")
	fetch(t, s.base+"/password-reset/SECRETTOKENSECRETTOKENSECRETTOKENSECRETTOK")
	fetch(t, s.base+"/unlock/UNLOCKTOKENUNLOCKTOKENUNLOCKTOKENUNLOCKTOK")
	fetch(t, s.base+"/sign-in/SIGNINTOKENSIGNINTOKENSIGNINTOKENSIGNINTOK")
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	logs := s.stderr.String()
	if id == "" || !strings.Contains(logs, `"request_id":"`+id+`"`) {
		t.Errorf("no log line with the request's ID %q", id)
	}
	for _, secret := range []string{"correct horse", "hunter2", "SECRETTOKEN", "UNLOCKTOKEN", "SIGNINTOKEN", testSecret, session[:20]} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain %q", secret)
		}
	}
}

// TestLogLevel: XCLOAK_LOG_LEVEL drops the lines below it, and debug
// shows the access log's quiet lines (the health probes').
func TestLogLevel(t *testing.T) {
	for _, tt := range []struct {
		level      string
		want, none []string
	}{
		{"debug", []string{`"level":"DEBUG","msg":"request","method":"GET","path":"/healthz"`, `"level":"INFO","msg":"listening"`}, nil},
		{"", []string{`"level":"INFO","msg":"listening"`}, []string{`"level":"DEBUG"`}},
		{"warn", nil, []string{`"level":"DEBUG"`, `"level":"INFO"`}},
	} {
		t.Run(tt.level, func(t *testing.T) {
			vars := storeSettings(t)
			vars["XCLOAK_LOG_LEVEL"] = tt.level
			s := startServe(t, vars)
			if status, _ := fetch(t, s.base+"/healthz"); status != http.StatusOK {
				t.Fatalf("/healthz: %d", status)
			}
			if err := s.stop(); err != nil {
				t.Fatal(err)
			}
			logs := s.stderr.String()
			for _, want := range tt.want {
				if !strings.Contains(logs, want) {
					t.Errorf("no %s in the log:\n%s", want, logs)
				}
			}
			for _, none := range tt.none {
				if strings.Contains(logs, none) {
					t.Errorf("%s in the log:\n%s", none, logs)
				}
			}
		})
	}
}

// TestLogDurationsInSeconds: every duration in the log is a number of
// seconds under a name ending in _seconds, never nanoseconds (what
// slog's JSON writes for a time.Duration) or a Go duration string.
func TestLogDurationsInSeconds(t *testing.T) {
	vars := storeSettings(t)
	vars["XCLOAK_LOG_LEVEL"] = "debug"
	s := startServe(t, vars)
	if status, _ := fetch(t, s.base+"/healthz"); status != http.StatusOK {
		t.Fatalf("/healthz: %d", status)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for line := range strings.Lines(s.stderr.String()) {
		var attrs map[string]any
		if err := json.Unmarshal([]byte(line), &attrs); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		for k, v := range attrs {
			switch {
			case k == "duration" || k == "timeout" || k == "age" || k == "lasted":
				t.Errorf("%q: %s=%v, a duration without its unit", attrs["msg"], k, v)
			case strings.HasSuffix(k, "_seconds"):
				if _, ok := v.(float64); !ok {
					t.Errorf("%q: %s=%v is no number", attrs["msg"], k, v)
				}
				got[attrs["msg"].(string)+" "+k] = v
			}
		}
	}
	if d, ok := got["request duration_seconds"].(float64); !ok || d <= 0 || d > 60 {
		t.Errorf("the request line's duration_seconds = %v, want a number of seconds", got["request duration_seconds"])
	}
	if got["shutting down timeout_seconds"] != shutdownTimeout.Seconds() {
		t.Errorf("shutting down: timeout_seconds = %v, want %v", got["shutting down timeout_seconds"], shutdownTimeout.Seconds())
	}
}

// TestMetricsOffTheMainAddressByDefault: unless told otherwise, serve
// puts the metrics on 127.0.0.1:9090, not on the public address. The test
// holds that port (or finds it held by someone else), so serve must fail
// to listen there: proof of where it tries, without racing other servers
// for the port.
func TestMetricsOffTheMainAddressByDefault(t *testing.T) {
	vars := storeSettings(t)
	delete(vars, "XCLOAK_METRICS_ADDR")
	ln, err := net.Listen("tcp", "127.0.0.1:9090")
	switch {
	case err == nil:
		defer ln.Close()
	case !errors.Is(err, syscall.EADDRINUSE):
		t.Fatalf("listen on 127.0.0.1:9090: %v", err)
	}
	// Cancelled as soon as serve says it listens: it must never get there.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr lockedBuffer
	err = run(ctx, []string{"xcloak", "serve", "--addr", "127.0.0.1:0"}, environ(vars), strings.NewReader(""),
		writerFunc(func(p []byte) (int, error) {
			if strings.Contains(string(p), "XCloak listening") {
				t.Errorf("serve started with 127.0.0.1:9090 taken: %s", p)
				cancel()
			}
			return len(p), nil
		}), &stderr)
	if want := "XCLOAK_METRICS_ADDR: listen on 127.0.0.1:9090"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("serve with 127.0.0.1:9090 taken: err = %v, want one containing %q\nstderr:\n%s", err, want, stderr.String())
	}
}

// writerFunc is an io.Writer made of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestMetricsSwitchedOff: XCLOAK_METRICS_ADDR=off serves no metrics at all.
func TestMetricsSwitchedOff(t *testing.T) {
	vars := storeSettings(t)
	vars["XCLOAK_METRICS_ADDR"] = "off"
	addUser(t, vars, "ann@example.com", "correct horse\n")
	s := startServe(t, vars)
	if status, _ := fetch(t, s.base+"/metrics"); status != http.StatusNotFound {
		t.Errorf("main address serves /metrics with metrics off: %d", status)
	}
	if resp := signIn(t, s.base, "ann@example.com", "correct horse"); resp.StatusCode != http.StatusOK {
		t.Errorf("sign-in with metrics off: %d", resp.StatusCode)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if out := s.stdout.String(); strings.Contains(out, "Metrics at") {
		t.Errorf("serve printed a metrics address with metrics off:\n%s", out)
	}
}

// TestMetricsServerBounded: the metrics listener is bounded as the main
// one is. Without an idle timeout a connection kept alive after a scrape,
// or opened and left, stays for as long as the peer likes, and any peer
// that reaches the port could hold as many as the process has files,
// which the main listener shares.
func TestMetricsServerBounded(t *testing.T) {
	srv := newMetricsServer(http.NotFoundHandler(), nil)
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Errorf("timeouts: header %v, read %v, write %v, idle %v; want each bounded",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
	if srv.MaxHeaderBytes <= 0 || srv.MaxHeaderBytes > 64<<10 {
		t.Errorf("MaxHeaderBytes = %d, want at most 64 KiB", srv.MaxHeaderBytes)
	}
}
