package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/web"
)

// TestHTTPServerBounds: the server XCloak serves with refuses a header
// larger than its bound, and bounds every phase of a connection's life.
func TestHTTPServerBounds(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	srv := web.NewHTTPServer(h, nil)
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Errorf("timeouts: header %v, request %v, answer %v, idle %v; want every one bounded",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.Config = srv
	ts.Start()
	defer ts.Close()
	for _, tc := range []struct {
		size int
		want int
	}{{1 << 10, http.StatusOK}, {80 << 10, http.StatusRequestHeaderFieldsTooLarge}} {
		req, err := http.NewRequest(http.MethodGet, ts.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Padding", strings.Repeat("a", tc.size))
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("a header of %d bytes answered %d, want %d", tc.size, resp.StatusCode, tc.want)
		}
	}
}
