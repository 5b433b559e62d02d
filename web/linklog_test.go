package web_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/xcloak/xcloak/web"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestLinkTokenNotLoggedOn503: when Postgres fails while a sign-in link is
// opened, the ERROR line "request failed" must not carry the raw path,
// which holds the live token (it did before loggablePath was used there).
func TestLinkTokenNotLoggedOn503(t *testing.T) {
	env, base := verifyEnv(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	token := heldToken(t, env, base, "127.0.0.1", "ann@example.com", "the password")

	var logs lockedBuf
	h := web.NewServer(env.Web, env.Service, env.Dashboard, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	srv := httptest.NewServer(h)
	defer srv.Close()

	// The database fails reading the token (a stand-in for an outage).
	if _, err := env.DB.Exec(context.Background(), `ALTER TABLE sign_in_tokens RENAME TO sign_in_tokens_gone`); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + "/sign-in/" + token)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("live sign-in token in the logs:\n%s", logs.String())
	}
}
