package web_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/ratelimit"
)

var resetLink = regexp.MustCompile(`https://login\.example\.test/password-reset/([A-Za-z0-9_-]{43})`)

// TestResetFlowOverHTTP: request through the form, read the mail from the
// SMTP sink, set the password through the page, sign in; the old session is
// gone and the link works once. The Host header plays no part in the link.
func TestResetFlowOverHTTP(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "old password", false)
	browser := xcloaktest.Client(t, "127.0.7.1")
	resp, _ := post(t, browser, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "old password"))
	if resp.StatusCode != 200 {
		t.Fatalf("sign-in: %d", resp.StatusCode)
	}

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/password-reset", strings.NewReader(url.Values{"email": {"ann@example.com"}}.Encode()))
	req.Header.Set("Content-Type", formType)
	req.Host = "attacker.example"
	resp, body := do(t, xcloaktest.Client(t, "127.0.7.2"), req)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(body, "If an account exists") {
		t.Fatalf("reset request: %d", resp.StatusCode)
	}
	mail := env.Mail.WaitFor(t, "ann@example.com")
	if strings.Contains(mail.Body, "attacker.example") {
		t.Fatal("reset link built from the Host header")
	}
	m := resetLink.FindStringSubmatch(mail.Body)
	if m == nil {
		t.Fatalf("no reset link in:\n%s", mail.Body)
	}
	page := base + "/password-reset/" + m[1]

	other := xcloaktest.Client(t, "127.0.7.3")
	if resp, body := get(t, other, page); resp.StatusCode != 200 || !strings.Contains(body, "Choose a new password") {
		t.Fatalf("reset page: %d", resp.StatusCode)
	}
	set := url.Values{"password": {"new password 1"}, "password_confirm": {"new password 1"}}.Encode()
	resp, _ = post(t, other, page, formType, set)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?reset=done" {
		t.Fatalf("set password: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get(t, browser, base+"/account"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("old session after reset: %d, want redirect to sign-in", resp.StatusCode)
	}
	if resp, body := post(t, other, page, formType, set); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "invalid or has expired") {
		t.Fatalf("second use of the link: %d", resp.StatusCode)
	}
	if resp, _ := post(t, other, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "new password 1")); resp.StatusCode != 200 {
		t.Fatalf("sign-in with the new password: %d", resp.StatusCode)
	}
	if resp, _ := post(t, other, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "old password")); resp.StatusCode != 401 {
		t.Fatalf("sign-in with the old password: %d", resp.StatusCode)
	}
}

func TestResetRequestLimitedOverHTTP(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	c := xcloaktest.Client(t, "127.0.7.4")
	for i := range env.Auth.Limits[auth.RuleResetAccount].Count {
		if resp, body := post(t, c, base+"/api/v1/password-reset", jsonType, `{"email":"x@example.com"}`); resp.StatusCode != 202 || strings.TrimSpace(body) != `{"status":"accepted"}` {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	resp, body := post(t, c, base+"/api/v1/password-reset", jsonType, `{"email":"x@example.com"}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, `"retry_after_seconds":`) {
		t.Fatalf("past the limit: %d %s", resp.StatusCode, body)
	}
}

// TestDroppedResetMailsShown: a reset mail dropped because its domain is
// over its limit is answered like any other request and shown on the
// dashboard and in the stats JSON.
func TestDroppedResetMailsShown(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.Limits[auth.RuleResetDomain] = ratelimit.Limit{Count: 1, Window: time.Minute}
		// The admin's new browser would have a notice of its own.
		c.NotifyNewDevice = false
	}})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.7.5")
	signIn(t, admin, base, adminEmail, anyPassword)
	c := xcloaktest.Client(t, "127.0.7.6")
	for _, email := range []string{"one@same.example", "two@same.example"} {
		env.AddUser(t, email, anyPassword, false)
		if resp, body := post(t, c, base+"/api/v1/password-reset", jsonType, `{"email":"`+email+`"}`); resp.StatusCode != 202 {
			t.Fatalf("reset for %s: %d %s", email, resp.StatusCode, body)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	var dropped struct {
		ResetMailsDropped int64 `json:"reset_mails_dropped"`
	}
	for dropped.ResetMailsDropped == 0 || len(env.Mail.Messages()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("20 s after the requests: %d mails dropped on the dashboard, %d sent", dropped.ResetMailsDropped, len(env.Mail.Messages()))
		}
		time.Sleep(50 * time.Millisecond)
		env.Flush(t)
		_, body := get(t, admin, base+"/api/v1/admin/stats?period=5m")
		if err := json.Unmarshal([]byte(body), &dropped); err != nil {
			t.Fatal(err)
		}
	}
	if dropped.ResetMailsDropped != 1 || len(env.Mail.Messages()) != 1 {
		t.Fatalf("%d mails dropped and %d sent; want 1 and 1", dropped.ResetMailsDropped, len(env.Mail.Messages()))
	}
	_, page := get(t, admin, base+"/admin?period=5m")
	if got := pageFigures(t, page)["mails_dropped"]; got != "1" {
		t.Fatalf("the dashboard shows %q reset mails not sent, want 1", got)
	}
}

// TestSentPagesSayTheLinkLife: the confirmations say how long the mailed
// link works as configured, not a fixed figure.
func TestSentPagesSayTheLinkLife(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.ResetTTL = 45 * time.Minute
		c.UnlockTTL = 2 * time.Hour
	}})
	base := env.Start(t)
	c := xcloaktest.Client(t, "127.0.4.1")
	form := url.Values{"email": {"ann@example.com"}}.Encode()
	if _, body := post(t, c, base+"/password-reset", formType, form); !strings.Contains(body, "for 45 minutes.") {
		t.Errorf("reset request page does not say 45 minutes: %s", body)
	}
	if _, body := post(t, c, base+"/unlock", formType, form); !strings.Contains(body, "within 2 hours;") {
		t.Errorf("unlock request page does not say 2 hours: %s", body)
	}
}

// TestResetEndsTheBrowsersOtherSession: a reset made in a browser signed
// in to another account drops that browser's session cookie, so it ends
// that session too: a session its browser forgot must not go on, listed
// as live and good to any copy of its cookie.
func TestResetEndsTheBrowsersOtherSession(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "ann password", false)
	env.AddUser(t, "bob@example.com", "bob password", false)
	shared := newBrowser(t, "127.0.7.21", firefoxLinux)
	shared.signIn(t, base, "ann@example.com", "ann password")
	var token string
	for _, c := range shared.c.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(base, "http://")}) {
		if c.Name == "xcloak_session" {
			token = c.Value
		}
	}
	if token == "" {
		t.Fatal("no session cookie after sign-in")
	}
	if resp, _ := post(t, xcloaktest.Client(t, "127.0.7.22"), base+"/api/v1/password-reset", jsonType, `{"email":"bob@example.com"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("reset request: %d", resp.StatusCode)
	}
	m := resetLink.FindStringSubmatch(env.Mail.WaitFor(t, "bob@example.com").Body)
	if m == nil {
		t.Fatal("no reset link mailed")
	}
	set := url.Values{"password": {"bob new password"}, "password_confirm": {"bob new password"}}.Encode()
	resp, _ := post(t, shared.c, base+"/password-reset/"+m[1], formType, set)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set password: %d", resp.StatusCode)
	}
	if _, err := env.Service.Session(t.Context(), token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("ann's session after its browser's cookie was cleared by bob's reset: %v; want it ended", err)
	}
}
