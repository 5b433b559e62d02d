package web_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
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

// TestLinkTokenNotLoggedOnUncleanPath: a link's path written with a
// doubled slash or a dot segment ("//password-reset/TOKEN", as a proxy
// that joins paths carelessly passes it on) is still a link: the mux
// redirects it to the clean path, which the browser follows. The request
// log must name it as the link's route, never with its live token.
func TestLinkTokenNotLoggedOnUncleanPath(t *testing.T) {
	env, base := verifyEnv(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	if resp, _ := post(t, xcloaktest.Client(t, "127.0.27.1"), base+"/password-reset", formType, url.Values{"email": {"ann@example.com"}}.Encode()); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("reset request: %d", resp.StatusCode)
	}
	reset := resetLink.FindStringSubmatch(env.Mail.WaitFor(t, "ann@example.com").Body)
	if reset == nil {
		t.Fatal("no reset link in the mail")
	}
	tokens := []string{
		reset[1],
		unlockToken(t, env, base, "127.0.27.2", "ann@example.com"),
		heldToken(t, env, base, "127.0.27.3", "ann@example.com", "the password"),
	}

	var logs lockedBuf
	h := web.NewServer(env.Web, env.Service, env.Dashboard, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := xcloaktest.Client(t, "127.0.27.4")
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, path := range []string{
		"//password-reset/" + tokens[0],
		"/./unlock/" + tokens[1],
		"/static/../sign-in/" + tokens[2],
	} {
		resp, _ := get(t, c, srv.URL+path)
		if resp.StatusCode >= 400 {
			t.Fatalf("GET %s: %d, want the mux's redirect to the clean path", path, resp.StatusCode)
		}
	}
	for _, token := range tokens {
		if strings.Contains(logs.String(), token) {
			t.Errorf("live link token in the logs:\n%s", logs.String())
		}
	}
}
