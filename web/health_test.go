package web_test

import (
	"context"
	"errors"
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
