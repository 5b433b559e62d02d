package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// duringDeletion signs an account in, sends method path with its session,
// and deletes the account, as another replica or the command line would,
// while the request is served: the deletion is held open in a transaction
// until the request waits for the account's row (a query starting with
// waitsOn), after its session was read, and then committed. It returns
// the answer and the browser.
func duringDeletion(t *testing.T, method, path, waitsOn string) (*http.Response, string, *http.Client, string) {
	t.Helper()
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	u := env.AddUser(t, "dee@example.com", "the password", false)
	browser := xcloaktest.Client(t, "127.0.44.1")
	signIn(t, browser, base, u.Email, "the password")

	deletion, err := env.DB.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer deletion.Rollback(context.Background())
	if _, err := deletion.Exec(t.Context(), `DELETE FROM users WHERE id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		resp *http.Response
		body string
	}
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), method, base+path, nil)
		resp, err := browser.Do(req)
		if err != nil {
			done <- answer{}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- answer{resp, string(b)}
	}()
	for waiting := false; !waiting; {
		select {
		case a := <-done:
			t.Fatalf("%s %s was answered before it waited for the account's row: %v %s", method, path, a.resp != nil, a.body)
		default:
		}
		if err := env.DB.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND starts_with(ltrim(query), $1))`, waitsOn).
			Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if !waiting {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := deletion.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.resp == nil {
		t.Fatalf("%s %s failed", method, path)
	}
	return a.resp, a.body, browser, base
}

// TestPasskeyOptionsOfADeletedAccount: the script asking for a passkey's
// registration options with the session of an account deleted meanwhile
// is answered 401, as a signed-out browser is, not 503 as if XCloak were
// down.
func TestPasskeyOptionsOfADeletedAccount(t *testing.T) {
	resp, body, browser, base := duringDeletion(t, http.MethodPost, "/account/mfa/passkey/options", "UPDATE users SET webauthn_handle")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"unauthenticated"`) {
		t.Fatalf("passkey options for an account deleted meanwhile: %d %s, want 401 unauthenticated", resp.StatusCode, body)
	}
	if resp, _ := get(t, browser, base+"/account/mfa"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the account's page after its deletion: %d, want a redirect to sign in", resp.StatusCode)
	}
}

// TestTOTPPageOfADeletedAccount: the page that sets up an authenticator
// app, opened with the session of an account deleted meanwhile, sends to
// the sign-in page, as for any browser signed out.
func TestTOTPPageOfADeletedAccount(t *testing.T) {
	resp, body, _, _ := duringDeletion(t, http.MethodGet, "/account/mfa/totp", "SELECT FROM users WHERE id = $1 FOR NO KEY UPDATE")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("the TOTP page for an account deleted meanwhile: %d %s, want a redirect to /login", resp.StatusCode, body)
	}
}
