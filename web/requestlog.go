package web

import (
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xcloak/xcloak/internal/requestid"
)

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes and
// deadlines for the dashboard's stream).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// loggedRequest is what logRequests keeps for a request, in one
// allocation rather than three: a flood of rejections pays for each.
type loggedRequest struct {
	statusRecorder
	// ctx is the request's context, carrying its ID.
	ctx requestid.Context
	// id is the X-Request-Id header's value.
	id [1]string
}

// logRequests gives every request an ID, returned as X-Request-ID and put
// on every log line written with the request's context, and logs one line
// when the request ends: method, path, status, duration_seconds, client,
// and cut for one whose answer a panic cut off.
// It never logs bodies, query strings, cookies or headers, so no password,
// token or session cookie reaches the log; reset, unlock and sign-in link
// pages, whose path holds a token, are logged as /password-reset/{token},
// /unlock/{token} and /sign-in/{token}, and outcomes as
// /api/v1/attempts/{attempt_id}/outcome. Rejections (429) are logged at
// debug level only, and so are forward-auth's answers but its refusals
// (403) and errors: a proxy asks about every request of every protected
// application, which logs it itself. The health probes' answers are at
// debug too, but for a failed one (5xx): an orchestrator asks every few
// seconds.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := requestid.New()
		lr := &loggedRequest{statusRecorder: statusRecorder{ResponseWriter: w}, id: [1]string{id}}
		// Set with its key in canonical form, as Header.Set would write
		// it, without canonicalising it on every request.
		w.Header()["X-Request-Id"] = lr.id[:]
		lr.ctx.Set(r.Context(), id)
		r = r.WithContext(&lr.ctx)
		rec := &lr.statusRecorder
		start := time.Now()
		defer func() {
			// A handler that panicked once its answer had begun has its
			// connection cut (recoverPanics panics again with
			// http.ErrAbortHandler, which net/http does not log): its
			// request is logged all the same, as an error, before the
			// panic goes on.
			if v := recover(); v != nil {
				s.logRequest(r, rec.status, start, slog.LevelError, true)
				panic(v)
			}
		}()
		next.ServeHTTP(rec, r)
		level := slog.LevelInfo
		switch {
		case rec.status >= 500:
			level = slog.LevelError
		case rec.status == http.StatusTooManyRequests:
			// A flood would otherwise write a line per rejected request;
			// every rejection is already a security event and a metric.
			level = slog.LevelDebug
		case rec.status != http.StatusForbidden && strings.HasPrefix(r.URL.Path, authzPrefix):
			level = slog.LevelDebug
		case r.URL.Path == "/healthz" || r.URL.Path == "/readyz":
			level = slog.LevelDebug
		}
		s.logRequest(r, rec.status, start, level, false)
	})
}

// logRequest writes the access-log line of r, answered with status, at
// level, when the log takes that level; cut adds that the answer was cut
// off.
func (s *Server) logRequest(r *http.Request, status int, start time.Time, level slog.Level, cut bool) {
	if !s.log.Enabled(r.Context(), level) {
		return
	}
	attrs := [...]slog.Attr{
		slog.String("method", loggableMethod(r.Method)),
		slog.String("path", loggablePath(r.URL.Path)),
		slog.Int("status", status),
		slog.Float64("duration_seconds", time.Since(start).Seconds()),
		slog.String("client", s.client(r).Source()),
		slog.Bool("cut", true),
	}
	n := len(attrs) - 1
	if cut {
		n++
	}
	s.log.LogAttrs(r.Context(), level, "request", attrs[:n]...)
}

// loggablePath is the request path with any reset or unlock token, or
// attempt id, replaced. The path is matched cleaned, as the mux matches
// it: "//password-reset/TOKEN" or "/./unlock/TOKEN", which the mux
// redirects to the link, hold its token as much. (path.Clean allocates
// only for a path it changes.)
func loggablePath(p string) string {
	clean := path.Clean(p)
	if strings.HasPrefix(clean, "/password-reset/") {
		return "/password-reset/{token}"
	}
	if strings.HasPrefix(clean, "/unlock/") {
		return "/unlock/{token}"
	}
	if strings.HasPrefix(clean, "/sign-in/") {
		return "/sign-in/{token}"
	}
	// An attempt id names the application's account and its client's
	// address.
	if strings.HasPrefix(clean, "/api/v1/attempts/") {
		return "/api/v1/attempts/{attempt_id}/outcome"
	}
	if len(p) > maxLoggedPath {
		// No route's path is near as long; a client's made-up one, up
		// to the request line's bound, would otherwise write some 64 KiB
		// a request into the log.
		cut := maxLoggedPath
		for cut > 0 && !utf8.RuneStart(p[cut]) {
			cut--
		}
		return p[:cut] + "…(" + strconv.Itoa(len(p)) + " bytes)"
	}
	return p
}

// maxLoggedPath bounds the path a line of the request log holds.
const maxLoggedPath = 512

// loggableMethod is the request's method, cut at maxLoggedMethod bytes.
// net/http takes any token as a method, up to the header's bound, and the
// mux answers one no route has 405, a line at info: a made-up method of
// some 64 KiB would otherwise be written into the log for every request.
// A method is a token, ASCII alone, so any cut is between characters.
func loggableMethod(m string) string {
	if len(m) <= maxLoggedMethod {
		return m
	}
	return m[:maxLoggedMethod] + "…(" + strconv.Itoa(len(m)) + " bytes)"
}

// maxLoggedMethod bounds the method a line of the log holds; the longest
// registered with IANA has 17 characters.
const maxLoggedMethod = 32
