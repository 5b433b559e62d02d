package web_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/templates"
	"github.com/xcloak/xcloak/web"
)

func mustHosts(t testing.TB, s string) web.ProtectedHosts {
	t.Helper()
	h, err := web.ParseProtectedHosts(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// rdEnv is an XCloak guarding app.example.test.
func rdEnv(t *testing.T, configure func(*auth.Config)) (*xcloaktest.Env, string) {
	t.Helper()
	env := xcloaktest.New(t, xcloaktest.Options{Auth: configure, Web: func(c *webConfig) {
		c.ProtectedHosts = mustHosts(t, "app.example.test")
	}})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	return env, base
}

const (
	appPage  = "https://app.example.test/docs?page=2"
	evilPage = "https://evil.example.test/"
)

func signInForm(email, password, rd string) string {
	return url.Values{templates.FieldEmail: {email}, templates.FieldPassword: {password}, templates.FieldReturn: {rd}}.Encode()
}

func location(resp *http.Response) string { return resp.Header.Get("Location") }

// TestLoginReturnsToRd: the sign-in page keeps an allowed rd in its form and
// returns there after signing in; a refused one is dropped and the browser
// goes to /account.
func TestLoginReturnsToRd(t *testing.T) {
	env, base := rdEnv(t, nil)
	c := xcloaktest.Client(t, "127.0.0.2")

	_, page := get(t, c, base+"/login?rd="+url.QueryEscape(appPage))
	if want := `name="rd" value="` + html.EscapeString(appPage) + `"`; !strings.Contains(page, want) {
		t.Errorf("sign-in page for an allowed rd lacks %s", want)
	}
	if _, page := get(t, c, base+"/login?rd="+url.QueryEscape(evilPage)); strings.Contains(page, `name="rd"`) || strings.Contains(page, "evil") {
		t.Error("sign-in page keeps a refused rd")
	}

	// A failed attempt keeps rd for the next.
	resp, page := post(t, c, base+"/login", formType, signInForm("ann@example.com", "wrong", appPage))
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, `name="rd"`) {
		t.Errorf("failed sign-in: %d, rd kept %v", resp.StatusCode, strings.Contains(page, `name="rd"`))
	}

	resp, _ = post(t, c, base+"/login", formType, signInForm("ann@example.com", "correct horse", appPage))
	if resp.StatusCode != http.StatusSeeOther || location(resp) != appPage {
		t.Fatalf("sign-in with rd: %d to %q, want 303 to %s", resp.StatusCode, location(resp), appPage)
	}
	// Signed in: /login?rd= goes on at once.
	if resp, _ := get(t, c, base+"/login?rd="+url.QueryEscape(appPage)); resp.StatusCode != http.StatusSeeOther || location(resp) != appPage {
		t.Errorf("signed in, /login?rd=allowed: %d to %q", resp.StatusCode, location(resp))
	}
	if resp, _ := get(t, c, base+"/login?rd="+url.QueryEscape(evilPage)); resp.StatusCode != http.StatusSeeOther || location(resp) != "/account" {
		t.Errorf("signed in, /login?rd=refused: %d to %q", resp.StatusCode, location(resp))
	}

	other := xcloaktest.Client(t, "127.0.0.3")
	for _, rd := range []string{evilPage, "//evil.example.test", "javascript:alert(1)", "https://app.example.test@evil.example.test/"} {
		resp, _ := post(t, other, base+"/login", formType, signInForm("ann@example.com", "correct horse", rd))
		if resp.StatusCode != http.StatusSeeOther || location(resp) != "/account" {
			t.Errorf("sign-in with rd %q: %d to %q, want /account", rd, resp.StatusCode, location(resp))
		}
	}
	_ = env
}

// TestLogoutPageAndRd: GET /logout signs no one out; its form's POST does,
// and returns to an allowed rd.
func TestLogoutPageAndRd(t *testing.T) {
	_, base := rdEnv(t, nil)
	c := xcloaktest.Client(t, "127.0.0.2")
	if resp, _ := post(t, c, base+"/login", formType, signInForm("ann@example.com", "correct horse", "")); location(resp) != "/account" {
		t.Fatalf("sign-in without rd: to %q, want /account", location(resp))
	}

	resp, page := get(t, c, base+"/logout?rd="+url.QueryEscape(appPage))
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `action="/logout"`) || !strings.Contains(page, html.EscapeString(appPage)) {
		t.Fatalf("GET /logout: %d, want the sign-out page keeping rd", resp.StatusCode)
	}
	if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after GET /logout, /account: %d; a GET signed out", resp.StatusCode)
	}

	resp, _ = post(t, c, base+"/logout", formType, url.Values{templates.FieldReturn: {appPage}}.Encode())
	if resp.StatusCode != http.StatusSeeOther || location(resp) != appPage {
		t.Fatalf("POST /logout with rd: %d to %q", resp.StatusCode, location(resp))
	}
	if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after sign-out, /account: %d", resp.StatusCode)
	}
	// Signed out already: GET /logout goes on.
	if resp, _ := get(t, c, base+"/logout?rd="+url.QueryEscape(appPage)); resp.StatusCode != http.StatusSeeOther || location(resp) != appPage {
		t.Errorf("signed out, GET /logout?rd=: %d to %q", resp.StatusCode, location(resp))
	}
	if resp, _ := get(t, c, base+"/logout?rd="+url.QueryEscape(evilPage)); location(resp) != "/account" {
		t.Errorf("signed out, GET /logout?rd=refused: to %q", location(resp))
	}
	if resp, _ := post(t, c, base+"/logout?rd="+url.QueryEscape(evilPage), formType, ""); location(resp) != "/account" {
		t.Errorf("POST /logout?rd=refused: to %q, want /account", location(resp))
	}
	if resp, _ := post(t, c, base+"/logout?rd="+url.QueryEscape(appPage), formType, ""); location(resp) != appPage {
		t.Errorf("POST /logout?rd= in the query: to %q", location(resp))
	}
}

// TestRdChangesNoRule: the sign-in reached with rd is the same flow: a
// locked account stays locked and a new browser held for verification
// stays held, rd or not.
func TestRdChangesNoRule(t *testing.T) {
	t.Run("lockout", func(t *testing.T) {
		env, base := rdEnv(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) })
		attacker := xcloaktest.Client(t, "127.0.0.4")
		for i := range env.Auth.Lockout.Threshold {
			if resp, _ := post(t, attacker, base+"/login", formType, signInForm("ann@example.com", fmt.Sprint("guess", i), appPage)); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("guess %d: %d", i, resp.StatusCode)
			}
		}
		fresh := xcloaktest.Client(t, "127.0.0.5")
		resp, _ := post(t, fresh, base+"/login", formType, signInForm("ann@example.com", "correct horse", appPage))
		if resp.StatusCode != http.StatusTooManyRequests || location(resp) != "" || len(resp.Cookies()) != 0 {
			t.Errorf("right password with rd during the lockout: %d to %q, cookies %v; want 429", resp.StatusCode, location(resp), resp.Cookies())
		}
	})
	t.Run("held new device", func(t *testing.T) {
		_, base := rdEnv(t, func(c *auth.Config) { c.NewDeviceVerification = auth.VerifyAlways })
		c := xcloaktest.Client(t, "127.0.0.6")
		resp, _ := post(t, c, base+"/login", formType, signInForm("ann@example.com", "correct horse", appPage))
		// No cookie but the held second step's binding.
		if resp.StatusCode != http.StatusAccepted || location(resp) != "" || len(resp.Cookies()) != 1 || resp.Cookies()[0].Name != "xcloak_mfa" {
			t.Errorf("new browser with rd: %d to %q, cookies %v; want 202 held", resp.StatusCode, location(resp), resp.Cookies())
		}
		if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("held browser's /account: %d, want a redirect to sign in", resp.StatusCode)
		}
	})
}

// TestRdDropsNotices: rd may name XCloak's own pages, and the redirect
// after signing in is XCloak's own, which the pages take for their forms'
// (ownRedirect). A link to sign in with rd naming a page and its notice
// would have XCloak confirm an act nobody did ("Attack mode is off",
// "Every other session was ended"): the notices are dropped from rd, and
// the rest of it kept.
func TestRdDropsNotices(t *testing.T) {
	_, base := rdEnv(t, nil)
	const own = "https://login.example.test"
	for rd, want := range map[string]string{
		own + "/admin?notice=attack-off":                own + "/admin",
		own + "/admin?period=1h&notice=attack-off":      own + "/admin?period=1h",
		own + "/account?sessions=ended":                 own + "/account",
		own + "/account?password=changed&session=ended": own + "/account",
		own + "/account/mfa?factor=removed":             own + "/account/mfa",
		own + "/login?unlock=done":                      own + "/login",
		own + "/login?reset=done":                       own + "/login",
		own + "/admin/users?q=ann":                      own + "/admin/users?q=ann",
		"https://app.example.test/docs?notice=whatever": "https://app.example.test/docs?notice=whatever",
	} {
		c := xcloaktest.Client(t, "127.0.0.2")
		resp, body := post(t, c, base+"/login", formType, signInForm("ann@example.com", "correct horse", rd))
		if resp.StatusCode != http.StatusSeeOther || location(resp) != want {
			t.Errorf("sign-in with rd %s: %d to %q, want 303 to %q (%s)", rd, resp.StatusCode, location(resp), want, body)
		}
		if resp, _ := get(t, c, base+"/login?rd="+url.QueryEscape(rd)); location(resp) != want {
			t.Errorf("signed in, /login?rd=%s: to %q, want %q", rd, location(resp), want)
		}
	}
}

// TestRdNotToExportOrStream: the redirect after signing in is XCloak's
// own, which the export, the live stream and the API take for one of its
// pages' fetches. No link from another site reaches them (linkable), and
// neither does one to sign in with rd naming them: an administrator's
// sign-in would run a 100,000-event export in their name. rd naming them
// goes to /account, in whatever spelling the mux would clean to them.
func TestRdNotToExportOrStream(t *testing.T) {
	_, base := rdEnv(t, nil)
	const own = "https://login.example.test"
	for _, rd := range []string{
		own + "/admin/events.csv?kind=login_failed",
		own + "/admin/stream?period=5m",
		own + "/api/v1/admin/events",
		own + "/admin//events.csv",
		own + "/admin/x/../events.csv",
		own + "/admin/events%2Ecsv",
		own + "//api/v1/admin/stats",
	} {
		c := xcloaktest.Client(t, "127.0.0.2")
		resp, body := post(t, c, base+"/login", formType, signInForm("ann@example.com", "correct horse", rd))
		if resp.StatusCode != http.StatusSeeOther || location(resp) != "/account" {
			t.Errorf("sign-in with rd %s: %d to %q, want 303 to /account (%s)", rd, resp.StatusCode, location(resp), body)
		}
	}
	c := xcloaktest.Client(t, "127.0.0.2")
	if resp, _ := post(t, c, base+"/login", formType, signInForm("ann@example.com", "correct horse", own+"/admin/events?kind=login_failed")); location(resp) != own+"/admin/events?kind=login_failed" {
		t.Errorf("sign-in with rd to the event search: to %q", location(resp))
	}
}
