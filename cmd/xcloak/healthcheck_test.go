package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/cli"
)

// TestHealthcheckReadyServer: the container's health check passes against
// a running server, reached through loopback when it listens on every
// interface, as it does in the image.
func TestHealthcheckReadyServer(t *testing.T) {
	vars := storeSettings(t)
	s := startServe(t, vars, "--addr", "0.0.0.0:0")
	_, port, err := net.SplitHostPort(strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"0.0.0.0:" + port, "127.0.0.1:" + port} {
		vars["XCLOAK_ADDR"] = addr
		stdout, stderr, err := xcloak(t, vars, "", "healthcheck")
		if err != nil {
			t.Errorf("healthcheck with XCLOAK_ADDR=%s: %v\nstderr: %s", addr, err, stderr)
		}
		if !strings.Contains(stdout, "/readyz") || !strings.Contains(stdout, "200") {
			t.Errorf("healthcheck with XCLOAK_ADDR=%s printed %q, want the URL and its status", addr, stdout)
		}
	}
}

// TestHealthcheckFails: a dead address or a server that is not ready makes
// the check exit non-zero with a message saying why.
func TestHealthcheckFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()

	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "redis: unreachable", http.StatusServiceUnavailable)
	}))
	defer notReady.Close()

	tests := []struct {
		name, addr, want string
	}{
		{"nothing listens", dead, "/readyz"},
		{"not ready", strings.TrimPrefix(notReady.URL, "http://"), "503"},
		{"port 0", "127.0.0.1:0", "port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, err := xcloak(t, nil, "", "healthcheck", "--addr", tt.addr)
			if err == nil {
				t.Fatalf("healthcheck --addr %s succeeded, want a failure", tt.addr)
			}
			if code := cli.ExitCode(err); code == 0 {
				t.Errorf("exit code %d, want non-zero", code)
			}
			if !strings.Contains(stderr, "xcloak healthcheck: ") || !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr = %q, want a message with %q", stderr, tt.want)
			}
		})
	}
}
