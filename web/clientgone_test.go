package web_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/web"
)

// TestClientGoneIsNoServerError: a sign-in whose client hung up before
// its limits were checked is answered 499, as a proxy would record it,
// and logged as what it is: not a 503 and an ERROR line of the service's
// own failing, which a flood's clients, closing their connections, would
// otherwise write by the thousand.
func TestClientGoneIsNoServerError(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	env.Start(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	var logs lockedBuf
	h := web.NewServer(env.Web, env.Service, env.Dashboard, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req := httptest.NewRequestWithContext(ctx, "POST", "http://127.0.0.1/api/v1/login",
		strings.NewReader(`{"email":"ann@example.com","password":"the password"}`))
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = "127.0.0.1:5000"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 499 {
		t.Errorf("status %d, want 499", rec.Code)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("an ERROR line for a client that went away:\n%s", logs.String())
	}
}

// TestClientGoneFromPageIsNoServerError: the pages, and the forms that
// answer their errors on their own page rather than through fail, take a
// client that hung up as the API does: 499, and no ERROR line (templ
// stops rendering at the cancelled context, which was logged as a
// failure to render, and answered 500).
func TestClientGoneFromPageIsNoServerError(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	env.Start(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	token := strings.Repeat("A", 43)
	for _, tc := range []struct{ method, path, form string }{
		{"GET", "/login", ""},
		{"GET", "/password-reset", ""},
		{"POST", "/login", "email=ann%40example.com&password=the+password"},
		{"POST", "/password-reset", "email=ann%40example.com"},
		{"POST", "/unlock", "email=ann%40example.com"},
		{"POST", "/login/mfa", "mfa_token=" + token + "&code=123456"},
		{"POST", "/password-reset/" + token, "password=a+new+password&password_confirm=a+new+password"},
		{"POST", "/unlock/" + token, ""},
		{"POST", "/sign-in/" + token, ""},
	} {
		var logs lockedBuf
		h := web.NewServer(env.Web, env.Service, env.Dashboard, nil, slog.New(slog.NewTextHandler(&logs, nil)))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		req := httptest.NewRequestWithContext(ctx, tc.method, "http://127.0.0.1"+tc.path, strings.NewReader(tc.form))
		if tc.method == "POST" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.RemoteAddr = "127.0.0.1:5000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 499 {
			t.Errorf("%s %s: status %d, want 499", tc.method, tc.path, rec.Code)
		}
		if strings.Contains(logs.String(), "level=ERROR") {
			t.Errorf("%s %s: an ERROR line for a client that went away:\n%s", tc.method, tc.path, logs.String())
		}
	}
}
