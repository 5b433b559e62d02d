package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// BenchmarkForwardAuth is forward-auth's answer for a live session, in
// process (no socket), the middleware included; BenchmarkBareHandler is
// the least a Go handler does, for comparison.
func BenchmarkForwardAuth(b *testing.B) {
	env := xcloaktest.New(b, xcloaktest.Options{Web: func(c *webConfig) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(proxyAddr + "/32")}
		c.ProtectedHosts = mustHosts(b, "app.example.test")
	}})
	env.AddUser(b, "ann@example.com", "correct horse", false)
	res, err := env.Service.Login(b.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "correct horse",
		Client: auth.Client{Addr: netip.MustParseAddr("127.0.0.9")}})
	if err != nil {
		b.Fatal(err)
	}
	token := res.Session.Token
	req := httptest.NewRequest(http.MethodGet, "/api/v1/authz/forward-auth", nil)
	req.RemoteAddr = proxyAddr + ":40000"
	req.Header.Set("Cookie", "xcloak_session="+token)
	req.Header.Set("X-Forwarded-Method", "GET")
	req.Header.Set("X-Forwarded-Proto", "https")
	req.Header.Set("X-Forwarded-Host", "app.example.test")
	req.Header.Set("X-Forwarded-Uri", "/docs?page=2")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w := httptest.NewRecorder()
			env.Handler.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("forward-auth: %d", w.Code)
			}
		}
	})
}

func BenchmarkBareHandler(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
		}
	})
}
