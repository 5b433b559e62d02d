package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/web"
)

// TestEventSearchesBoundedPerReplica: the event searches and exports that
// run at once on a replica, whatever their sessions, take at most half of
// its Postgres pool's connections. Each page of a search may hold one for
// up to ten seconds, and a handful of administrators' sessions (or one
// stolen cookie signed in a few times) would otherwise take every
// connection from the sign-ins. Past the bound, the page, the API and the
// export are answered 429 too_many_searches with Retry-After; an ordinary
// user still signs in; once the running ones end, a search runs again.
func TestEventSearchesBoundedPerReplica(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	env.AddUser(t, "ann@example.com", anyPassword, false)
	insertFailedSignIns(t, env, 300)
	bound := max(1, int(env.DB.Config().MaxConns)/2)
	h := web.NewServer(env.Web, env.Service, env.Dashboard, nil, nil)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	export := func(c *http.Client, ip string, w http.ResponseWriter) {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, base+"/admin/events.csv", nil)
		req.RemoteAddr = ip + ":5000"
		for _, ck := range c.Jar.Cookies(u) {
			req.AddCookie(ck)
		}
		defer func() {
			if v := recover(); v != nil && v != http.ErrAbortHandler {
				panic(v)
			}
		}()
		h.ServeHTTP(w, req)
	}

	// The bound is filled by exports whose readers do not read, each of a
	// session of its own, so that no session's own cap is what refuses.
	release := make(chan struct{})
	var ended []chan struct{}
	for i := range bound {
		ip := fmt.Sprintf("127.0.81.%d", i+1)
		c := xcloaktest.Client(t, ip)
		signIn(t, c, base, adminEmail, anyPassword)
		w := &stalled{ResponseRecorder: httptest.NewRecorder(), writing: make(chan struct{}), release: release}
		done := make(chan struct{})
		go func() {
			defer close(done)
			export(c, ip, w)
		}()
		<-w.writing
		ended = append(ended, done)
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

	// An ordinary user's sign-in is not held up by them.
	signIn(t, xcloaktest.Client(t, "127.0.81.201"), base, "ann@example.com", anyPassword)

	close(release)
	for _, done := range ended {
		<-done
	}
	if resp, body := get("/api/v1/admin/events?kind=login_failed"); resp.StatusCode != http.StatusOK {
		t.Errorf("a search once the others ended: %d %.300s, want 200", resp.StatusCode, body)
	}
	if resp, _ := get("/admin/events.csv"); resp.StatusCode != http.StatusOK {
		t.Errorf("an export once the others ended: %d, want 200", resp.StatusCode)
	}
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

	// The server notices a closed stream when its connection ends; the
	// deadline only keeps a broken server from hanging the test.
	first.Body.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		events, resp := openStream(t, next, base+"/admin/stream?period=5m")
		if resp.StatusCode == http.StatusOK {
			awaitEvent(t, events, "live", func(string) bool { return true })
			break
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("a stream once another closed: %d, want 200 once the closed one is gone", resp.StatusCode)
		}
	}
}
