package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/web"
)

// TestEventSearchesBoundedPerReplica: the event searches and exports that
// read from Postgres at once on a replica, whatever their sessions, take
// at most half of its pool's connections. Each page of a search may hold
// one for up to ten seconds, and a handful of administrators' sessions (or
// one stolen cookie signed in a few times) would otherwise take every
// connection from the sign-ins. Past the bound, the page, the API and the
// export are answered 429 too_many_searches with Retry-After; an ordinary
// user still signs in, on the connections left; once the running ones
// end, a search runs again. The searches are held in Postgres itself, by
// a lock on the events' table taken from a connection of the test's own.
func TestEventSearchesBoundedPerReplica(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	env.AddUser(t, "ann@example.com", anyPassword, false)
	insertFailedSignIns(t, env, 300)
	bound := max(1, int(env.DB.Config().MaxConns)/2)

	lock, err := pgx.Connect(t.Context(), env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(context.Background())
	tx, err := lock.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(t.Context(), "LOCK TABLE security_events IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	// The bound is filled by searches waiting on the lock, each of a
	// session of its own.
	ended := make(chan int, bound)
	for i := range bound {
		ip := fmt.Sprintf("127.0.81.%d", i+1)
		c := xcloaktest.Client(t, ip)
		signIn(t, c, base, adminEmail, anyPassword)
		go func() {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v1/admin/events?kind=login_failed", nil)
			if err != nil {
				ended <- 0
				return
			}
			resp, err := c.Do(req)
			if err != nil {
				ended <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ended <- resp.StatusCode
		}()
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		// The lock's transaction would otherwise see the activity as it
		// first read it, for as long as it lasts.
		if _, err := lock.Exec(t.Context(), "SELECT pg_stat_clear_snapshot()"); err != nil {
			t.Fatal(err)
		}
		var waiting int
		if err := lock.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%security_events%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= bound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d searches waiting on the lock, want %d", waiting, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}

	admin := xcloaktest.Client(t, "127.0.81.200")
	signIn(t, admin, base, adminEmail, anyPassword)
	get := func(path string) (*http.Response, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return do(t, admin, req)
	}
	v := openAPIValidator(t)
	for _, path := range []string{"/admin/events?kind=login_failed", "/api/v1/admin/events?kind=login_failed", "/admin/events.csv"} {
		resp, body := get(path)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s with %d searches running: %d Retry-After %q, want 429 with Retry-After\n%.300s",
				path, bound, resp.StatusCode, resp.Header.Get("Retry-After"), body)
			continue
		}
		if strings.HasPrefix(path, "/api/") {
			if !strings.Contains(body, `"error":"too_many_searches"`) {
				t.Errorf("%s: %s, want too_many_searches", path, body)
			}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
			resp.Body = io.NopCloser(strings.NewReader(body))
			if ok, errs := v.ValidateHttpRequestResponse(req, resp); !ok {
				for _, e := range errs {
					t.Errorf("%s (429): %s: %s", path, e.Message, e.Reason)
				}
			}
		} else if !strings.Contains(body, "Too many event searches") {
			t.Errorf("%s: the page does not say why\n%.1000s", path, body)
		}
	}

	// An ordinary user's sign-in is not held up by them: the searches
	// hold their connections, and the pool has others.
	signIn(t, xcloaktest.Client(t, "127.0.81.201"), base, "ann@example.com", anyPassword)

	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range bound {
		if code := <-ended; code != http.StatusOK {
			t.Errorf("a search held by the lock ended %d, want 200", code)
		}
	}
	if resp, body := get("/api/v1/admin/events?kind=login_failed"); resp.StatusCode != http.StatusOK {
		t.Errorf("a search once the others ended: %d %.300s, want 200", resp.StatusCode, body)
	}
	if resp, _ := get("/admin/events.csv"); resp.StatusCode != http.StatusOK {
		t.Errorf("an export once the others ended: %d, want 200", resp.StatusCode)
	}
}

// TestSlowExportHoldsNoSearchPlace: an export whose reader does not read
// holds no place among the replica's searches while it waits on its
// reader: a place is held for a page's read from Postgres alone, so two
// slow exports of one administrator do not stop every search.
func TestSlowExportHoldsNoSearchPlace(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	insertFailedSignIns(t, env, 300)
	h := web.NewServer(env.Web, env.Service, env.Dashboard, nil, nil)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	admin := xcloaktest.Client(t, "127.0.82.1")
	signIn(t, admin, base, adminEmail, anyPassword)
	n := env.Dashboard.MaxSearches()
	release := stallExports(t, h, func() *http.Request { return exportRequest(t, base+"/admin/events.csv", u, admin, "127.0.82.1") }, n)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v1/admin/events?kind=login_failed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := do(t, admin, req); resp.StatusCode != http.StatusOK {
		t.Errorf("a search beside %d exports waiting on their reader: %d %.300s, want 200", n, resp.StatusCode, body)
	}
	release()
}

// TestStreamsBoundedPerReplica: a replica holds at most web.MaxStreams
// dashboard streams at once, whatever their sessions: each session's own
// bound of four does not keep a few sessions from pinning connections and
// goroutines by the hundred. The next stream is a 429 saying why; a
// stream closed makes room again.
func TestStreamsBoundedPerReplica(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	var first *http.Response
	for i := 0; i < web.MaxStreams; i += web.MaxStreamsPerSession {
		c := xcloaktest.Client(t, fmt.Sprintf("127.0.82.%d", i/web.MaxStreamsPerSession+1))
		signIn(t, c, base, adminEmail, anyPassword)
		for range min(web.MaxStreamsPerSession, web.MaxStreams-i) {
			events, resp := openStream(t, c, base+"/admin/stream?period=5m")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("stream %d: %d, want 200", i+1, resp.StatusCode)
			}
			awaitEvent(t, events, "live", func(string) bool { return true })
			if first == nil {
				first = resp
			}
		}
	}
	next := xcloaktest.Client(t, "127.0.82.250")
	signIn(t, next, base, adminEmail, anyPassword)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/admin/stream?period=5m", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := next.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "Too many live dashboards") {
		t.Fatalf("a stream past the replica's bound: %d Retry-After %q, want 429 with Retry-After and the reason\n%.300s",
			resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}

	first.Body.Close()
	awaitStreamReopens(t, next, base+"/admin/stream?period=5m")
}
