package web

import (
	"context"
	"embed"
	"io"
	"io/fs"
	"net/http"
	"time"
)

// handleHealthz says the process serves requests; it checks nothing else,
// so a load balancer does not restart replicas when a shared store blips.
func handleHealthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
}

// handleReadyz says whether Redis and Postgres answer.
func (s *Server) handleReadyz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status, body := http.StatusOK, map[string]string{}
		for name, err := range s.ready(ctx) {
			body[name] = "ok"
			if err != nil {
				status, body[name] = http.StatusServiceUnavailable, "unavailable"
				s.log.Warn("readiness check failed", "store", name, "err", err)
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
