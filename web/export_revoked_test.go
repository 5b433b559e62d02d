package web_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/web"
)

// TestEventExportEndsWithItsSession: an export of many pages stops at the
// next page once its session no longer belongs to an administrator (the
// administrator demoted, disabled or signed out everywhere), as the live
// stream does, and its connection is cut so the file cannot be taken for
// a whole one. A reader who reads slowly would otherwise go on taking up
// to 100,000 events long after the session was revoked.
func TestEventExportEndsWithItsSession(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	const rows = 3000 // three pages of the export
	insertFailedSignIns(t, env, rows)
	h := web.NewServer(env.Web, env.Service, env.Dashboard, nil, nil)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name string
		end  func(ctx context.Context, user auth.User) error
	}{
		{"demoted", func(ctx context.Context, user auth.User) error {
			_, err := env.Service.DemoteUser(ctx, user.ID, "test")
			return err
		}},
		{"disabled", func(ctx context.Context, user auth.User) error {
			_, err := env.Service.DisableUser(ctx, user.ID, "test")
			return err
		}},
		{"signed out everywhere", func(ctx context.Context, user auth.User) error {
			return env.Service.SignOutEverywhere(ctx, user.Email, "test")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			email := fmt.Sprintf("exporter%d@example.com", i)
			user := env.AddUser(t, email, anyPassword, true)
			ip := fmt.Sprintf("127.0.79.%d", i+1)
			admin := xcloaktest.Client(t, ip)
			signIn(t, admin, base, email, anyPassword)
			req := exportRequest(t, base+"/admin/events.csv?kind=login_failed", u, admin, ip)
			// The session is revoked once part of the first page is out.
			w := &revokedMidway{ResponseRecorder: httptest.NewRecorder(), revoke: func() {
				if err := tc.end(t.Context(), user); err != nil {
					t.Error(err)
				}
			}}
			cut := serveExport(h, req, w)
			if w.Code != http.StatusOK {
				t.Fatalf("export: %d", w.Code)
			}
			lines, _ := csv.NewReader(strings.NewReader(w.Body.String())).ReadAll()
			if len(lines) > 1+1000 {
				t.Errorf("%d rows exported after the session was revoked in the first page, want at most that page's 1000", len(lines)-1)
			}
			if !cut {
				t.Error("the export ended as a whole file, want its connection cut")
			}
		})
	}
}

// revokedMidway takes writes as a connection's buffers do, and calls
// revoke once, when the first 64 KiB are written.
type revokedMidway struct {
	*httptest.ResponseRecorder
	revoke  func()
	written int
	done    bool
}

func (w *revokedMidway) Write(b []byte) (int, error) {
	if w.written += len(b); w.written > 64<<10 && !w.done {
		w.done = true
		w.revoke()
	}
	return w.ResponseRecorder.Write(b)
}

// TestEventExportsCappedPerSession: one session runs at most
// web.MaxExportsPerSession exports at once, as it holds at most four live
// streams: an export outlives the server's bound on an ordinary answer,
// each holding a page of events in memory while its reader reads, so a
// stolen administrator's cookie could otherwise open them by the thousand.
// The next is a 429 saying why; another session is not affected; an
// export that ends makes room again.
func TestEventExportsCappedPerSession(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	insertFailedSignIns(t, env, 300)
	h := web.NewServer(env.Web, env.Service, env.Dashboard, nil, nil)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	session := func(ip string) func() *http.Request {
		c := xcloaktest.Client(t, ip)
		signIn(t, c, base, adminEmail, anyPassword)
		return func() *http.Request { return exportRequest(t, base+"/admin/events.csv", u, c, ip) }
	}
	export := func(req *http.Request, w http.ResponseWriter) { _ = serveExport(h, req, w) }
	first := session("127.0.79.10")
	release := stallExports(t, h, first, web.MaxExportsPerSession)
	w := httptest.NewRecorder()
	export(first(), w)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "Too many exports") || w.Header().Get("Retry-After") == "" {
		t.Errorf("an export past the session's bound: %d Retry-After %q, want 429 with Retry-After and the reason\n%.300s",
			w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
	other := httptest.NewRecorder()
	export(session("127.0.79.11")(), other)
	if other.Code != http.StatusOK {
		t.Errorf("another session's export: %d, want 200", other.Code)
	}
	release()
	again := httptest.NewRecorder()
	export(first(), again)
	if again.Code != http.StatusOK {
		t.Errorf("an export after the others ended: %d, want 200", again.Code)
	}
}

// exportRequest is a request for target, an export of events, with the
// cookies c holds for u, from ip.
func exportRequest(t *testing.T, target string, u *url.URL, c *http.Client, ip string) *http.Request {
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, target, nil)
	req.RemoteAddr = ip + ":5000"
	for _, ck := range c.Jar.Cookies(u) {
		req.AddCookie(ck)
	}
	return req
}

// serveExport serves req through h into w, as net/http would: a handler
// that cuts its connection (http.ErrAbortHandler) only ends its answer,
// which cut reports.
func serveExport(h http.Handler, req *http.Request, w http.ResponseWriter) (cut bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			cut = true
		}
	}()
	h.ServeHTTP(w, req)
	return false
}

// stallExports starts n exports of the requests req makes, each to a
// reader that does not read, and returns once each has begun its answer.
// release lets them finish and waits for them.
func stallExports(t *testing.T, h http.Handler, req func() *http.Request, n int) (release func()) {
	t.Helper()
	unblock := make(chan struct{})
	var ended []chan struct{}
	for range n {
		w := &stalled{ResponseRecorder: httptest.NewRecorder(), writing: make(chan struct{}), release: unblock}
		done := make(chan struct{})
		go func() {
			defer close(done)
			serveExport(h, req(), w)
		}()
		<-w.writing // the export runs, its reader not reading
		ended = append(ended, done)
	}
	return func() {
		close(unblock)
		for _, done := range ended {
			<-done
		}
	}
}

// stalled is a reader that does not read: its first write waits, after
// closing writing, until release is closed.
type stalled struct {
	*httptest.ResponseRecorder
	writing chan struct{}
	release chan struct{}
	started bool
}

func (w *stalled) Write(b []byte) (int, error) {
	if !w.started {
		w.started = true
		close(w.writing)
		<-w.release
	}
	return w.ResponseRecorder.Write(b)
}
