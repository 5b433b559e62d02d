package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/breached"
	"github.com/xcloak/xcloak/breached/breachedtest"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/templates"
)

// breachedMessage is what a refused breached password is answered with.
const breachedMessage = "This password has appeared in a data breach; choose another one."

// withCorpus starts an Env whose breach corpus is corpus, read through a
// local range API, as a deployment with XCLOAK_BREACHED_PASSWORDS set to
// a mirror reads it.
func withCorpus(t *testing.T, corpus *breachedtest.Corpus, configure func(*auth.Config)) *xcloaktest.Env {
	t.Helper()
	checker, err := breached.Open(corpus.Serve(t), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return xcloaktest.New(t, xcloaktest.Options{Breached: checker, Auth: configure})
}

func changeJSON(current, next string) string {
	b, _ := json.Marshal(map[string]string{"current_password": current, "new_password": next})
	return string(b)
}

func changeForm(current, next, confirm string) string {
	return url.Values{templates.FieldCurrentPassword: {current}, templates.FieldNewPassword: {next}, templates.FieldConfirm: {confirm}}.Encode()
}

// errorCode is the "error" of a JSON error body.
func errorCode(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Error
}

// TestBreachedPasswordRefusedOverHTTP: a reset and a change to a breached
// password are refused with a 400 that says why, on the page and in the
// API, and the password stays as it was.
func TestBreachedPasswordRefusedOverHTTP(t *testing.T) {
	corpus := breachedtest.New(t)
	corpus.Add(t, "password123")
	env := withCorpus(t, corpus, nil)
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "old password", false)

	c := xcloaktest.Client(t, "127.0.12.1")
	signIn(t, c, base, "ann@example.com", "old password")
	resp, body := post(t, c, base+"/account/password", formType, changeForm("old password", "password123", "password123"))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, breachedMessage) {
		t.Errorf("change form to a breached password: %d, want 400 saying %q:\n%s", resp.StatusCode, breachedMessage, body)
	}
	resp, body = post(t, c, base+"/api/v1/account/password", jsonType, changeJSON("old password", "password123"))
	if resp.StatusCode != http.StatusBadRequest || errorCode(t, body) != "breached_password" {
		t.Errorf("change API to a breached password: %d %s, want 400 breached_password", resp.StatusCode, body)
	}

	if resp, _ := post(t, c, base+"/api/v1/password-reset", jsonType, `{"email":"ann@example.com"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("reset request: %d", resp.StatusCode)
	}
	m := resetLink.FindStringSubmatch(env.Mail.WaitFor(t, "ann@example.com").Body)
	if m == nil {
		t.Fatal("no reset link in the mail")
	}
	set := url.Values{"password": {"password123"}, "password_confirm": {"password123"}}.Encode()
	resp, body = post(t, c, base+"/password-reset/"+m[1], formType, set)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, breachedMessage) {
		t.Errorf("reset form to a breached password: %d, want 400 saying %q:\n%s", resp.StatusCode, breachedMessage, body)
	}
	resp, body = post(t, c, base+"/api/v1/password-reset/confirm", jsonType, fmt.Sprintf(`{"token":%q,"password":"password123"}`, m[1]))
	if resp.StatusCode != http.StatusBadRequest || errorCode(t, body) != "breached_password" {
		t.Errorf("reset API to a breached password: %d %s, want 400 breached_password", resp.StatusCode, body)
	}
	signIn(t, xcloaktest.Client(t, "127.0.12.2"), base, "ann@example.com", "old password")
}

// TestRestrictedSessionOverHTTP: an administrator's known browser signs
// in with a password that has since appeared in a breach. The session can
// show the change page, change the password and sign out, and nothing
// else: the account page and the dashboard send it to the change page,
// the admin API answers 403. Once the password is changed, the same
// session goes everywhere again.
func TestRestrictedSessionOverHTTP(t *testing.T) {
	corpus := breachedtest.New(t)
	env := withCorpus(t, corpus, nil)
	base := env.Start(t)
	env.AddUser(t, "root@example.com", "password123", true)
	browser := xcloaktest.Client(t, "127.0.12.10")
	signIn(t, browser, base, "root@example.com", "password123")
	corpus.Add(t, "password123")
	signIn(t, browser, base, "root@example.com", "password123")

	for _, path := range []string{"/account", "/admin", "/admin?period=1h", "/"} {
		resp, _ := get(t, browser, base+path)
		want := "/account/password"
		if path == "/" {
			want = "/account" // which sends it on
		}
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("GET %s: %d to %q, want 303 to %s", path, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	resp, body := get(t, browser, base+"/api/v1/admin/stats")
	if resp.StatusCode != http.StatusForbidden || errorCode(t, body) != "password_change_required" {
		t.Errorf("admin API: %d %s, want 403 password_change_required", resp.StatusCode, body)
	}
	form := url.Values{"email": {"root@example.com"}, "period": {"5m"}}.Encode()
	if resp, _ := post(t, browser, base+"/admin/users/sign-out", formType, form); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account/password" {
		t.Errorf("admin action: %d to %q, want 303 to /account/password", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body = get(t, browser, base+"/account/password")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "appeared in a data breach") {
		t.Errorf("change page: %d, want 200 saying why:\n%s", resp.StatusCode, body)
	}

	resp, _ = post(t, browser, base+"/account/password", formType, changeForm("password123", "a new one, nowhere leaked", "a new one, nowhere leaked"))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account?password=changed" {
		t.Fatalf("change: %d to %q, want 303 to /account?password=changed", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body = get(t, browser, base+"/account?password=changed")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Your password was changed.") {
		t.Errorf("account page after the change: %d, want 200 with the notice", resp.StatusCode)
	}
	if resp, _ := get(t, browser, base+"/api/v1/admin/stats"); resp.StatusCode != http.StatusOK {
		t.Errorf("admin API after the change: %d, want 200", resp.StatusCode)
	}
	if resp, _ := post(t, browser, base+"/logout", formType, ""); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("sign-out: %d, want 303", resp.StatusCode)
	}
}

// TestPasswordChangeOverHTTP: two browsers are signed in; one changes the
// password through the API. The other's session ends and its device is
// forgotten, the changing one stays signed in as a known device, and the
// owner is mailed.
func TestPasswordChangeOverHTTP(t *testing.T) {
	// The two new browsers' notices would come first (notify_test.go).
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.NotifyNewDevice = false }})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "old password", false)
	mine, other := xcloaktest.Client(t, "127.0.12.20"), xcloaktest.Client(t, "127.0.12.21")
	signIn(t, mine, base, "ann@example.com", "old password")
	signIn(t, other, base, "ann@example.com", "old password")
	myDevice := deviceCookie(t, env, mine, base, "ann@example.com")

	resp, body := post(t, mine, base+"/api/v1/account/password", jsonType, changeJSON("old password", "new password!"))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != `{"status":"ok"}` {
		t.Fatalf("change: %d %s, want 200 {\"status\":\"ok\"}", resp.StatusCode, body)
	}
	if resp, _ := get(t, mine, base+"/account"); resp.StatusCode != http.StatusOK {
		t.Errorf("the changing browser's account page: %d, want 200", resp.StatusCode)
	}
	if resp, _ := get(t, other, base+"/account"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("the other browser's account page: %d to %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	var devices int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM devices`).Scan(&devices); err != nil {
		t.Fatal(err)
	}
	if devices != 1 {
		t.Errorf("%d known devices after the change, want the changing browser's only", devices)
	}
	signIn(t, mine, base, "ann@example.com", "new password!")
	if got := deviceCookie(t, env, mine, base, "ann@example.com"); got != myDevice {
		t.Error("the changing browser is no longer a known device: its cookie was replaced")
	}
	mail := env.Mail.WaitFor(t, "ann@example.com")
	if !strings.Contains(mail.Body, "was changed") || resetLink.FindString(mail.Body) == "" {
		t.Errorf("mail does not say the password was changed with a reset link:\n%s", mail.Body)
	}
	if strings.Contains(mail.Body, "new password!") || strings.Contains(mail.Body, "old password") {
		t.Error("the mail quotes a password")
	}
}

// TestPasswordChangeRefusals: what the change answers when it cannot be
// made, and that wrong current passwords count towards the account's
// lockout as failed sign-ins do.
func TestPasswordChangeRefusals(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.Lockout.Threshold = 3
		c.Limits.SetCount(auth.RuleLoginAccount, 1000)
	}})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "old password", false)

	stranger := xcloaktest.Client(t, "127.0.12.30")
	resp, body := post(t, stranger, base+"/api/v1/account/password", jsonType, changeJSON("old password", "new password!"))
	if resp.StatusCode != http.StatusUnauthorized || errorCode(t, body) != "unauthenticated" {
		t.Errorf("API without a session: %d %s, want 401 unauthenticated", resp.StatusCode, body)
	}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		req, _ := http.NewRequestWithContext(t.Context(), method, base+"/account/password", strings.NewReader(changeForm("a", "b", "b")))
		req.Header.Set("Content-Type", formType)
		if resp, _ := do(t, stranger, req); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Errorf("%s without a session: %d to %q, want 303 to /login", method, resp.StatusCode, resp.Header.Get("Location"))
		}
	}

	browser := xcloaktest.Client(t, "127.0.12.31")
	signIn(t, browser, base, "ann@example.com", "old password")
	for name, c := range map[string]struct {
		form   string
		status int
		says   string
	}{
		"different twice": {changeForm("old password", "new password!", "new password?"), http.StatusBadRequest, "do not match"},
		"too short":       {changeForm("old password", "short", "short"), http.StatusBadRequest, "at least 8 characters"},
		"malformed":       {"current_password=a&current_password=b", http.StatusBadRequest, "valid"},
	} {
		if resp, body := post(t, browser, base+"/account/password", formType, c.form); resp.StatusCode != c.status || !strings.Contains(body, c.says) {
			t.Errorf("%s: %d, want %d saying %q", name, resp.StatusCode, c.status, c.says)
		}
	}
	for name, h := range map[string][]string{"cross-site": {"Sec-Fetch-Site", "cross-site"}, "foreign origin": {"Origin", "https://evil.example"}} {
		if resp, _ := post(t, browser, base+"/api/v1/account/password", jsonType, changeJSON("old password", "new password!"), h...); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, resp.StatusCode)
		}
	}
	if resp, body := post(t, browser, base+"/api/v1/account/password", jsonType, `{"current_password":"old password"}`+"x"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("malformed JSON: %d %s, want 400", resp.StatusCode, body)
	}

	// The session alone, no device cookie: the account's lockout counts
	// the wrong current passwords, as it counts failed sign-ins.
	session := ""
	u, _ := url.Parse(base)
	for _, ck := range browser.Jar.Cookies(u) {
		if ck.Name == "xcloak_session" {
			session = ck.Value
		}
	}
	bare := &http.Client{Transport: browser.Transport, CheckRedirect: browser.CheckRedirect}
	for i := range env.Auth.Lockout.Threshold {
		resp, body := post(t, bare, base+"/api/v1/account/password", jsonType, changeJSON(fmt.Sprint("wrong ", i), "new password!"), "Cookie", "xcloak_session="+session)
		if resp.StatusCode != http.StatusUnauthorized || errorCode(t, body) != "invalid_credentials" {
			t.Fatalf("wrong current password %d: %d %s, want 401 invalid_credentials", i, resp.StatusCode, body)
		}
	}
	resp, body = post(t, bare, base+"/api/v1/account/password", jsonType, changeJSON("old password", "new password!"), "Cookie", "xcloak_session="+session)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("right current password on the locked account: %d %s, want 429 with Retry-After", resp.StatusCode, body)
	}
	if resp, _ := post(t, xcloaktest.Client(t, "127.0.12.32"), base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "old password")); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("sign-in from a new browser on the account the changes locked: %d, want 429", resp.StatusCode)
	}
}

// jarSession is the session cookie's value in c's jar for base, "" if none.
func jarSession(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	u, _ := url.Parse(base)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "xcloak_session" {
			return ck.Value
		}
	}
	return ""
}

// TestPasswordChangeRotatesSession: changing the password, from the form
// or the API, and from a session that had to change it or one that did
// not, gives the browser a new session token and ends the old one: a copy
// of the old cookie, taken before the change, is signed out on the
// account API and at forward-auth, while the browser goes on signed in.
// A session restricted to changing its password is never lifted under a
// token that was issued restricted.
func TestPasswordChangeRotatesSession(t *testing.T) {
	corpus := breachedtest.New(t)
	checker, err := breached.Open(corpus.Serve(t), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := xcloaktest.New(t, xcloaktest.Options{Breached: checker, Web: func(c *webConfig) {
		c.TrustedProxies = mustPrefixes(t, proxyAddr)
		c.ProtectedHosts = mustHosts(t, "app.example.test")
	}})
	base := env.Start(t)
	for i, tc := range []struct {
		name       string
		restricted bool
		change     func(t *testing.T, c *http.Client, current, next string) *http.Response
	}{
		{"form", false, func(t *testing.T, c *http.Client, current, next string) *http.Response {
			resp, _ := post(t, c, base+"/account/password", formType, changeForm(current, next, next))
			return resp
		}},
		{"api", false, func(t *testing.T, c *http.Client, current, next string) *http.Response {
			resp, _ := post(t, c, base+"/api/v1/account/password", jsonType, changeJSON(current, next))
			return resp
		}},
		{"restricted", true, func(t *testing.T, c *http.Client, current, next string) *http.Response {
			resp, _ := post(t, c, base+"/account/password", formType, changeForm(current, next, next))
			return resp
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			email, password := fmt.Sprintf("rot%d@example.com", i), fmt.Sprintf("password%d-leaky", i)
			env.AddUser(t, email, password, false)
			browser := xcloaktest.Client(t, fmt.Sprintf("127.0.12.%d", 60+i))
			signIn(t, browser, base, email, password)
			if tc.restricted {
				corpus.Add(t, password)
				signIn(t, browser, base, email, password)
			}
			old := jarSession(t, browser, base)
			resp := tc.change(t, browser, password, "a new one, nowhere leaked "+fmt.Sprint(i))
			if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("change: %d", resp.StatusCode)
			}
			fresh := jarSession(t, browser, base)
			if fresh == "" || fresh == old {
				t.Errorf("session cookie after the change: %q, want a new token in place of the old one", fresh)
			}
			if resp, _ := get(t, browser, base+"/api/v1/account/sessions"); resp.StatusCode != http.StatusOK {
				t.Errorf("the changing browser after the change: %d, want 200", resp.StatusCode)
			}
			bare := &http.Client{Transport: browser.Transport, CheckRedirect: browser.CheckRedirect}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v1/account/sessions", nil)
			req.Header.Set("Cookie", "xcloak_session="+old)
			if resp, body := do(t, bare, req); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("the old token replayed on the API: %d %s, want 401", resp.StatusCode, body)
			}
			if resp := forwardAuth(t, base, proxyAddr, old, forwarded("https", "app.example.test", "/")...); resp.StatusCode == http.StatusOK {
				t.Errorf("the old token replayed at forward-auth: %d, want it signed out", resp.StatusCode)
			}
			if resp := forwardAuth(t, base, proxyAddr, fresh, forwarded("https", "app.example.test", "/")...); resp.StatusCode != http.StatusOK {
				t.Errorf("the new token at forward-auth: %d, want 200", resp.StatusCode)
			}
		})
	}
}

// TestPasswordChangeWithPostgresDown: a password change that cannot read
// its session because Postgres is down answers 503, as every other
// signed-in route does, not 401 or the sign-in page: the browser is still
// signed in, and a client told it is not would drop a session that works
// again once Postgres is back.
func TestPasswordChangeWithPostgresDown(t *testing.T) {
	pg, base, c := annSignedInOnOwnPostgres(t, "127.0.32.1")

	pg.Stop()
	if resp, body := post(t, c, base+"/api/v1/account/password", jsonType, changeJSON("old password", "new password!")); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("API change with Postgres down: %d %s; want 503", resp.StatusCode, body)
	}
	if resp, _ := post(t, c, base+"/account/password", formType, changeForm("old password", "new password!", "new password!")); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("form change with Postgres down: %d to %q; want 503", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get(t, c, base+"/account/password"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("password page with Postgres down: %d to %q; want 503", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestSignOutPageWithPostgresDown: the sign-out page, where a protected
// application's "sign out" link leads, answers 503 when it cannot read
// the session because Postgres is down, rather than go on to the
// application as it does for a browser signed out: the session would
// still work once Postgres is back, its user believing it ended.
func TestSignOutPageWithPostgresDown(t *testing.T) {
	pg, base, c := annSignedInOnOwnPostgres(t, "127.0.32.2")
	if resp, _ := get(t, c, base+"/logout"); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-out page, signed in: %d; want 200", resp.StatusCode)
	}

	pg.Stop()
	if resp, _ := get(t, c, base+"/logout"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("sign-out page with Postgres down: %d to %q; want 503", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// annSignedInOnOwnPostgres starts a server on a Postgres of the test's own,
// which it may stop, and signs ann in from addr: the Postgres, the
// server's URL and her client.
func annSignedInOnOwnPostgres(t *testing.T, addr string) (*testenv.PostgresServer, string, *http.Client) {
	t.Helper()
	pg := migratedPrivatePostgres(t)
	env := xcloaktest.New(t, xcloaktest.Options{DatabaseURL: pg.URL()})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "old password", false)
	c := xcloaktest.Client(t, addr)
	if resp, body := post(t, c, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "old password")); resp.StatusCode != 200 {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, body)
	}
	return pg, base, c
}

// TestSignInAPISaysChangePassword: a known browser's sign-in with a
// password that has since appeared in a breach is answered
// {"status":"change_password"} by the API, after the password alone or
// after the second step, as a passkey's is: a client told "ok" would find
// out only from the 403 of its next call.
func TestSignInAPISaysChangePassword(t *testing.T) {
	corpus := breachedtest.New(t)
	checker, err := breached.Open(corpus.Serve(t), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	env, base, clk := mfaEnv(t, xcloaktest.Options{Breached: checker})
	env.AddUser(t, "pat@example.com", "password123", false)
	browser := xcloaktest.Client(t, "127.0.12.20")
	signIn(t, browser, base, "pat@example.com", "password123")
	u := enrolTOTP(t, env, base, clk, "quin@example.test", false)
	corpus.Add(t, "password123")
	corpus.Add(t, u.password)

	resp, body := post(t, browser, base+"/api/v1/login", jsonType, loginJSON("pat@example.com", "password123"))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != `{"status":"change_password"}` {
		t.Errorf("password alone: %d %s, want 200 change_password", resp.StatusCode, body)
	}
	token := mfaLoginJSON(t, u.browser, base, u)
	if status, body := mfaJSON(t, u.browser, base, token, u.code(t)); status != http.StatusOK || body != `{"status":"change_password"}` {
		t.Errorf("second step: %d %s, want 200 change_password", status, body)
	}
	if resp, body := get(t, u.browser, base+"/api/v1/account/sessions"); resp.StatusCode != http.StatusForbidden || errorCode(t, body) != "password_change_required" {
		t.Errorf("sessions after the second step: %d %s, want 403 password_change_required", resp.StatusCode, body)
	}
}
