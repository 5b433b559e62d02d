package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

func TestSecurityHeaders(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	c := xcloaktest.Client(t, "127.0.6.1")
	for _, path := range []string{"/login", "/password-reset", "/password-reset/" + strings.Repeat("A", 43), "/account"} {
		resp, _ := get(t, c, base+path)
		h := resp.Header
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", path, h)
		}
		wantReferrer := "same-origin"
		if strings.HasPrefix(path, "/password-reset") {
			wantReferrer = "no-referrer"
		}
		if got := h.Get("Referrer-Policy"); got != wantReferrer {
			t.Errorf("%s: Referrer-Policy %q, want %q", path, got, wantReferrer)
		}
	}
	resp, body := get(t, c, base+"/static/app.css")
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "text/css") || len(body) == 0 {
		t.Errorf("stylesheet: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// The files are served, not listed.
	if resp, body := get(t, c, base+"/static/"); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "app.css") {
		t.Errorf("/static/: %d %q; want 404 without a listing", resp.StatusCode, body)
	}
}

// TestCrossOriginPostRefused: a browser POST from another site is refused
// before it reaches the service, on the form and on the API.
func TestCrossOriginPostRefused(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	c := xcloaktest.Client(t, "127.0.6.2")
	form := url.Values{"email": {"ann@example.com"}, "password": {"correct horse"}}.Encode()
	for _, h := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Origin", "https://evil.example"},
	} {
		resp, _ := post(t, c, base+"/login", formType, form, h...)
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Errorf("form with %v: %d, %d cookies; want 403 and none", h, resp.StatusCode, len(resp.Cookies()))
		}
		resp, body := post(t, c, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "correct horse"), h...)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "cross_origin_request") {
			t.Errorf("API with %v: %d %s; want 403", h, resp.StatusCode, body)
		}
	}
	if resp, _ := post(t, c, base+"/login", formType, form, "Sec-Fetch-Site", "same-origin"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("same-origin form: %d, want 303", resp.StatusCode)
	}
}

func TestHealthAndReady(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	c := xcloaktest.Client(t, "127.0.6.3")
	if resp, body := get(t, c, base+"/healthz"); resp.StatusCode != 200 || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %d %q", resp.StatusCode, body)
	}
	if resp, body := get(t, c, base+"/readyz"); resp.StatusCode != 200 || !strings.Contains(body, `"postgres":"ok"`) || !strings.Contains(body, `"redis":"ok"`) {
		t.Errorf("/readyz: %d %s", resp.StatusCode, body)
	}
}
