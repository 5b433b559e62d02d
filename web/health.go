package web

import (
	"context"
	"embed"
	"io"
	"io/fs"
	"net/http"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// handleHealthz says the process serves requests; it checks nothing else,
// so a load balancer does not restart replicas when a shared store blips.
func handleHealthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
}

// handleReadyz says whether this replica should get traffic. Postgres must
// answer. Redis need not, unless the failure policy is "closed": under
// "local" and "open" a replica without Redis still serves sign-ins by its
// policy, and taking every replica out of rotation when Redis is lost would
// undo that policy. The body names each store's state and what the limits
// follow now: {"postgres":"ok","redis":"unavailable","limits":"local (degraded)"}.
func (s *Server) handleReadyz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status, body := http.StatusOK, map[string]string{}
		for name, err := range s.ready(ctx) {
			body[name] = "ok"
			if err != nil {
				body[name] = "unavailable"
				if name != "redis" {
					status = http.StatusServiceUnavailable
				}
				s.log.Warn("readiness check failed", "store", name, "err", err)
			}
		}
		policy := s.auth.FailurePolicy()
		body["limits"] = "redis"
		if s.auth.Degraded() || body["redis"] == "unavailable" {
			body["limits"] = string(policy) + " (degraded)"
			if policy == ratelimit.FailClosed {
				status = http.StatusServiceUnavailable
			}
		}
		writeJSON(w, status, body)
	})
}

//go:embed static
var static embed.FS

// handleStatic serves the stylesheet and icon compiled into the binary.
func handleStatic() http.Handler {
	files, _ := fs.Sub(static, "static")
	fileServer := http.StripPrefix("/static/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fileServer.ServeHTTP(w, r)
	})
}
