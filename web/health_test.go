package web_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/web"
)

// TestHealthProbesAccessLog: an orchestrator probes every replica every
// few seconds, so the probes' answers stay out of the access log at info
// and are there at debug; a failed readiness check is logged at any level.
func TestHealthProbesAccessLog(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	postgres := error(nil)
	ready := func(context.Context) map[string]error { return map[string]error{"postgres": postgres} }
	probe := func(level slog.Level) string {
		var buf syncBuffer
		h := web.NewServer(env.Web, env.Service, env.Dashboard, ready,
			slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level})))
		srv := httptest.NewServer(h)
		defer srv.Close()
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		return buf.String()
	}

	if got := probe(slog.LevelInfo); got != "" {
		t.Errorf("probes logged at info:\n%s", got)
	}
	got := probe(slog.LevelDebug)
	for _, want := range []string{`"path":"/healthz","status":200`, `"path":"/readyz","status":200`} {
		if !strings.Contains(got, want) {
			t.Errorf("debug log has no %s:\n%s", want, got)
		}
	}
	postgres = errors.New("connection refused")
	if got := probe(slog.LevelInfo); !strings.Contains(got, `"path":"/readyz","status":503`) {
		t.Errorf("a failed readiness check is not logged:\n%s", got)
	}
}

// TestReadyzTellsTheStoresToThisMachineAlone: /readyz names each store's
// state and what the limits follow to a client on this machine (the
// container's health check, an operator's curl); to one a proxy forwards,
// which may be anyone, it says only whether the replica is ready: that the
// limits are degraded helps time an attack.
func TestReadyzTellsTheStoresToThisMachineAlone(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	postgres := error(nil)
	ready := func(context.Context) map[string]error { return map[string]error{"postgres": postgres, "redis": nil} }
	srv := httptest.NewServer(web.NewServer(env.Web, env.Service, env.Dashboard, ready, slog.New(slog.DiscardHandler)))
	defer srv.Close()
	ask := func(header string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/readyz", nil)
		if err != nil {
			t.Fatal(err)
		}
		if header != "" {
			req.Header.Set(header, "for=198.51.100.7")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		if _, err := io.Copy(&b, resp.Body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, strings.TrimSpace(b.String())
	}
	if status, body := ask(""); status != 200 || body != `{"limits":"redis","postgres":"ok","redis":"ok"}` {
		t.Errorf("from this machine: %d %s, want each store's state", status, body)
	}
	for _, header := range []string{"X-Forwarded-For", "Forwarded", "X-Real-IP"} {
		if status, body := ask(header); status != 200 || body != `{"status":"ok"}` {
			t.Errorf("forwarded (%s): %d %s, want 200 {\"status\":\"ok\"}", header, status, body)
		}
	}
	postgres = errors.New("connection refused")
	if status, body := ask("X-Forwarded-For"); status != 503 || body != `{"status":"unavailable"}` {
		t.Errorf("forwarded, Postgres down: %d %s, want 503 {\"status\":\"unavailable\"}", status, body)
	}
}
