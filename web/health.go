package web

import (
	"context"
	"embed"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
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
// undo that policy. To a client on this machine (a loopback peer, the
// request forwarded by no proxy: the container's health check, an
// operator's curl) the body names each store's state and what the limits
// follow now: {"postgres":"ok","redis":"unavailable","limits":"local (degraded)"}.
// To any other it says only {"status":"ok"} or {"status":"unavailable"}:
// that the limits are degraded, or off under "open", helps time an attack,
// which is why the metrics that say so have an address of their own.
func (s *Server) handleReadyz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		results, err := s.ready.get(r.Context())
		if err != nil {
			return // the prober hung up
		}
		status, body := http.StatusOK, map[string]string{}
		for name, err := range results {
			body[name] = "ok"
			if err != nil {
				body[name] = "unavailable"
				if name != "redis" {
					status = http.StatusServiceUnavailable
				}
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
		if !fromThisMachine(r) {
			body = map[string]string{"status": "ok"}
			if status != http.StatusOK {
				body["status"] = "unavailable"
			}
		}
		writeJSON(w, status, body)
	})
}

// fromThisMachine reports whether r came from a loopback peer and through
// no proxy: one that forwards names its client in a header of the kind,
// whether or not XCloak is told to believe it.
func fromThisMachine(r *http.Request) bool {
	peer, ok := parsePeer(r.RemoteAddr)
	if !ok || !peer.IsLoopback() {
		return false
	}
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Real-Ip"} {
		if _, forwarded := r.Header[h]; forwarded {
			return false
		}
	}
	return true
}

// readyTimeout bounds one check of the stores.
const readyTimeout = 2 * time.Second

// readiness shares one check of the stores among the requests for /readyz
// that arrive while it runs. Anyone may send them: a flood of them then
// costs Redis and Postgres one check at a time, on one connection each,
// rather than one per request, which would take the pool's connections
// from sign-ins. A request answered so learns what the stores said at
// most one check's time before it arrived.
type readiness struct {
	check ReadyCheck
	log   *slog.Logger

	mu      sync.Mutex
	running *readyRun       // the check under way, nil if none
	down    map[string]bool // the stores the last check found down
}

// readyRun is one check of the stores; result is set before done closes.
type readyRun struct {
	done   chan struct{}
	result map[string]error
}

// get returns what a check of the stores begun no earlier than the last
// one under way found, or ctx's error if ctx ends first.
func (r *readiness) get(ctx context.Context) (map[string]error, error) {
	r.mu.Lock()
	run := r.running
	if run == nil {
		run = &readyRun{done: make(chan struct{})}
		r.running = run
		// Bounded on its own, not by the request: a prober that
		// hangs up does not cut the check short for the others.
		go r.run(run)
	}
	r.mu.Unlock()
	select {
	case <-run.done:
		return run.result, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *readiness) run(run *readyRun) {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	run.result = r.check(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = nil
	close(run.done)
	// A store's failure is logged when it begins and its end when it
	// ends, not at every check while it lasts.
	if r.down == nil {
		r.down = map[string]bool{}
	}
	for name, err := range run.result {
		switch {
		case err != nil && !r.down[name]:
			r.log.Warn("readiness check failed", "store", name, "err", err)
		case err == nil && r.down[name]:
			r.log.Info("readiness check passes again", "store", name)
		}
		r.down[name] = err != nil
	}
}

//go:embed static
var static embed.FS

// handleStatic serves the stylesheet, scripts and icon compiled into the
// binary: files, never a listing of them (a directory is no page of
// XCloak's).
func handleStatic() http.Handler {
	files, _ := fs.Sub(static, "static")
	fileServer := http.StripPrefix("/static/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fileServer.ServeHTTP(w, r)
	})
}
