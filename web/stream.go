package web

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/web/live"
)

// Live updates.
const (
	// liveInterval is how often a watched period's figures are re-read.
	// Events reach the stores within the Recorder's flush interval, so the
	// page shows new traffic within about a second and a half.
	liveInterval = time.Second
	// streamPing keeps idle proxies from closing a quiet stream.
	streamPing = 15 * time.Second
	// streamRecheck is how often a stream checks that its session still
	// belongs to an administrator who may see the dashboard, as every
	// request to it does (requireAdmin): a sign-out, a revoked session, a
	// demotion or a removed factor ends it within that, on the replica
	// that made the change (the others within their session cache's
	// second). The session comes from that cache, so the check costs a
	// query only for the factor, and only under XCLOAK_ADMIN_MFA=required.
	streamRecheck = time.Second
	// streamLifetime ends every stream after a while; the browser
	// reconnects at once, which spreads streams over replicas again after
	// a deploy.
	streamLifetime = 10 * time.Minute
	// streamWriteTimeout drops a client that stops reading.
	streamWriteTimeout = 10 * time.Second
	// streamRetry is the reconnection delay the browser is told to use.
	streamRetry = 2 * time.Second
	// maxStreamsPerSession bounds the streams one session holds open at
	// once on a replica: a few tabs are normal, and a stolen or scripted
	// admin session cannot pin an unbounded number of connections and
	// goroutines.
	maxStreamsPerSession = 4
	// maxStreams bounds the streams a replica holds open at once, whatever
	// their sessions: each session's own bound does not keep a few
	// sessions (or one stolen cookie signed in again and again) from
	// pinning connections, goroutines and write buffers by the hundred. A
	// room of security staff's dashboards is far fewer.
	maxStreams = 32
	// streamsFullRetry is how long a stream refused for maxStreams asks
	// its client to wait.
	streamsFullRetry = time.Minute
)

// handleDashboardStream serves GET /admin/stream: Server-Sent Events that
// carry the dashboard's live regions as HTML ("live", "lockouts",
// "events"), each sent at once and then whenever it changes, and a
// "status" event when the stores stop or start answering.
//
// All streams of a period share one reader (live.Hub), so a room of open
// dashboards costs the stores no more than one.
func (s *Server) handleDashboardStream() http.Handler {
	hub := live.NewHub(s.renderLive, liveInterval, s.log)
	shutdowns := &shutdownWatch{done: map[*http.Server]chan struct{}{}}
	open := &streamCounts{n: map[string]int{}, max: maxStreamsPerSession}
	all := make(chan struct{}, maxStreams)
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) error {
		q, err := parseDashboardQuery(r.URL.Query())
		if err != nil {
			return err
		}
		if r.Method == http.MethodHead {
			// The headers alone: net/http sends a HEAD no body, and a
			// stream held open for none would keep one of the session's
			// places until its client hung up.
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-store")
			return nil
		}
		token := s.readCookie(r, sessionCookie)
		if !open.acquire(token) {
			return errTooManyStreams
		}
		defer open.release(token)
		select {
		case all <- struct{}{}:
			defer func() { <-all }()
		default:
			return errStreamsFull
		}
		q.before = 0
		rc := http.NewResponseController(w)
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)

		var buf bytes.Buffer
		send := func() bool {
			// The server's WriteTimeout is for ordinary requests; a stream
			// gets a deadline per write instead.
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			_, err := w.Write(buf.Bytes())
			buf.Reset()
			return err == nil && rc.Flush() == nil
		}
		buf.WriteString("retry: " + strconv.FormatInt(streamRetry.Milliseconds(), 10) + "\n\n")
		if !send() {
			return nil
		}
		sub := hub.Subscribe(q.period)
		defer hub.Unsubscribe(sub)
		ping := time.NewTicker(streamPing)
		defer ping.Stop()
		recheck := time.NewTicker(streamRecheck)
		defer recheck.Stop()
		end := time.NewTimer(streamLifetime)
		defer end.Stop()
		shuttingDown := shutdowns.of(r)

		var sent live.Frame
		for {
			select {
			case <-r.Context().Done():
				return nil
			case <-shuttingDown:
				return nil
			case <-end.C:
				return nil
			case <-recheck.C:
				if !s.mayWatch(r.Context(), token) {
					return nil
				}
			case <-ping.C:
				buf.WriteString(": ping\n\n")
				if !send() {
					return nil
				}
			case <-sub.Ready():
				f := hub.Latest(sub)
				if f.Failed != sent.Failed || sent.Live == "" {
					status := "ok"
					if f.Failed {
						status = "unavailable"
					}
					writeEvent(&buf, "status", status)
				}
				for _, part := range []struct{ name, now, before string }{
					{"live", f.Live, sent.Live},
					{"lockouts", f.Lockouts, sent.Lockouts},
					{"events", f.Events, sent.Events},
				} {
					if part.now != part.before && part.now != "" {
						writeEvent(&buf, part.name, part.now)
					}
				}
				sent = f
				if buf.Len() > 0 && !send() {
					return nil
				}
			}
		}
	})
}

// mayWatch reports whether the session of token still lets its holder see
// the dashboard: an administrator's, with a factor where one is required.
// The session comes from the proxies' cache (streamRecheck says why), so
// that an open stream does not read Postgres every second.
func (s *Server) mayWatch(ctx context.Context, token string) bool {
	return s.stillAdmin(ctx, s.auth.ProxySession, token)
}

// stillAdmin reports whether the session of token, as lookup reads it,
// still lets its holder reach the administrators' routes, as requireAdmin
// would let a new request: an administrator's, with a factor where one is
// required. For answers that outlast their request's check (the stream,
// the export).
func (s *Server) stillAdmin(ctx context.Context, lookup func(context.Context, string) (auth.Session, error), token string) bool {
	sess, err := lookup(ctx, token)
	if err != nil || !sess.IsAdmin || sess.MustChangePassword {
		return false
	}
	need, err := s.auth.AdminNeedsFactor(ctx, sess)
	return err == nil && !need
}

// streamCounts counts the open streams (or exports) of each session, by
// its token.
type streamCounts struct {
	mu  sync.Mutex
	n   map[string]int
	max int // places of one session
}

// acquire takes a place for a stream of the session, or reports false
// when it holds max already.
func (c *streamCounts) acquire(token string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[token] >= c.max {
		return false
	}
	c.n[token]++
	return true
}

// release gives back a place acquire took.
func (c *streamCounts) release(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[token]--; c.n[token] <= 0 {
		delete(c.n, token)
	}
}

// shutdownWatch tells streams that their http.Server is shutting down.
// Shutdown waits for every request in flight, and a stream never ends by
// itself: without this, each open dashboard would hold a graceful
// shutdown until its deadline. An ended stream reconnects, to a replica
// that is still up.
type shutdownWatch struct {
	mu   sync.Mutex
	done map[*http.Server]chan struct{}
}

// of returns a channel closed when the server serving r begins to shut
// down; nil (never ready) when r carries no server.
func (sw *shutdownWatch) of(r *http.Request) <-chan struct{} {
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	if srv == nil {
		return nil
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	ch := sw.done[srv]
	if ch == nil {
		ch = make(chan struct{})
		sw.done[srv] = ch
		srv.RegisterOnShutdown(func() {
			sw.mu.Lock()
			defer sw.mu.Unlock()
			close(ch)
			delete(sw.done, srv)
		})
	}
	return ch
}

// writeEvent appends one Server-Sent Event, data split into lines. Any
// line break (CR, LF or both) ends a data line, so none can end the event
// early or start a field.
func writeEvent(buf *bytes.Buffer, name, data string) {
	buf.WriteString("event: " + name + "\n")
	data = strings.ReplaceAll(data, "\r\n", "\n")
	data = strings.ReplaceAll(data, "\r", "\n")
	for line := range strings.SplitSeq(data, "\n") {
		buf.WriteString("data: ")
		buf.WriteString(line)
		buf.WriteByte('\n')
	}
	buf.WriteByte('\n')
}
