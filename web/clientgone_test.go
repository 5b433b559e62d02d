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
