package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/client"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newApp makes the app, asking a real XCloak, and returns both.
func newApp(t *testing.T) (*xcloaktest.Env, *App) {
	t.Helper()
	env := xcloaktest.New(t, xcloaktest.Options{})
	xc, err := client.New(env.Start(t), env.AddAPIKey(t, "ownusers"))
	if err != nil {
		t.Fatal(err)
	}
	app, err := NewApp(Config{XCloak: xc, BcryptCost: bcrypt.MinCost, InsecureCookies: true,
		Users: map[string]string{"ann@example.com": "ann's password", "bob@example.com": "bob's password"}})
	if err != nil {
		t.Fatal(err)
	}
	return env, app
}

// ownUsers runs the app against a real XCloak and returns both, the app's
// URL, and the count of password comparisons the app has made.
func ownUsers(t *testing.T) (*xcloaktest.Env, string, *atomic.Int64) {
	t.Helper()
	env, app := newApp(t)
	var hashed atomic.Int64
	app.compare = func(hash, password []byte) error {
		hashed.Add(1)
		return bcrypt.CompareHashAndPassword(hash, password)
	}
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(srv.Close)
	return env, srv.URL, &hashed
}

// signIn posts the sign-in form and returns the answer and its page.
func signIn(t *testing.T, c *http.Client, base, email, password string) (*http.Response, string) {
	t.Helper()
	resp, err := c.PostForm(base+"/login", url.Values{"email": {email}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestRightPasswordSignsIn(t *testing.T) {
	_, base, _ := ownUsers(t)
	browser := xcloaktest.Client(t, "127.0.0.1")
	resp, page := signIn(t, browser, base, "Ann@Example.com", "ann's password")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("sign-in: %d %s %s, want 303 to /", resp.StatusCode, resp.Header.Get("Location"), page)
	}
	resp, err := browser.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "Signed in as <strong>ann@example.com</strong>") {
		t.Fatalf("home after sign-in: %d %s", resp.StatusCode, b)
	}
}

// TestWrongTriesAreDeniedBeforeHashing: ten wrong passwords for one user
// are checked and refused; the eleventh try, and then the right password,
// are denied by XCloak with 429 before the app hashes anything, and the
// lockout reaches XCloak's dashboard events under the app's name.
func TestWrongTriesAreDeniedBeforeHashing(t *testing.T) {
	env, base, hashed := ownUsers(t)
	attacker := xcloaktest.Client(t, "127.0.0.1")
	limit := env.Auth.Limits[auth.RuleLoginAccount].Count
	for i := range limit {
		if resp, page := signIn(t, attacker, base, "bob@example.com", "guess "+strconv.Itoa(i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong try %d: %d %s, want 401", i+1, resp.StatusCode, page)
		}
	}
	if n := hashed.Load(); n != int64(limit) {
		t.Fatalf("%d wrong tries made %d comparisons, want %d", limit, n, limit)
	}
	for _, password := range []string{"guess again", "bob's password"} {
		resp, page := signIn(t, attacker, base, "bob@example.com", password)
		retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusTooManyRequests || retry <= 0 || !strings.Contains(page, "Too many attempts") {
			t.Fatalf("try after %d wrong ones: %d, Retry-After %q, %s; want 429 with a Retry-After", limit, resp.StatusCode, resp.Header.Get("Retry-After"), page)
		}
	}
	if n := hashed.Load(); n != int64(limit) {
		t.Errorf("denied tries were hashed: %d comparisons, want %d", n, limit)
	}

	// The dashboard lists an application's accounts as "app NAME ACCOUNT",
	// and its sign-ins' events name the application.
	env.Flush(t)
	events, err := env.Dashboard.Events(t.Context(), dashboard.EventFilter{Kinds: []string{auth.EventLockout, auth.EventLoginFailed}, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var lockouts, failures int
	for _, e := range events {
		if e.Account != "app ownusers bob@example.com" {
			t.Errorf("event %s of account %q, want ownusers' bob@example.com", e.Kind, e.Account)
		}
		switch e.Kind {
		case auth.EventLockout:
			lockouts++
		case auth.EventLoginFailed:
			failures++
			if e.Detail["app"] != "ownusers" {
				t.Errorf("failure's detail %v names no app ownusers", e.Detail)
			}
		}
	}
	if lockouts != 1 || failures != limit {
		t.Errorf("dashboard events: %d lockouts and %d failures, want 1 and %d", lockouts, failures, limit)
	}
}

// TestNewBrowserIsChallengedInAttackMode: while XCloak is in attack mode a
// browser new to the account is asked to verify another way, whatever the
// password, and gets no session; the browser that signed in before does.
func TestNewBrowserIsChallengedInAttackMode(t *testing.T) {
	env, base, _ := ownUsers(t)
	known := xcloaktest.Client(t, "127.0.0.1")
	if resp, page := signIn(t, known, base, "ann@example.com", "ann's password"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first sign-in: %d %s", resp.StatusCode, page)
	}
	if _, err := env.Attack.SwitchAttack(t.Context(), true, "test"); err != nil {
		t.Fatal(err)
	}
	stranger := xcloaktest.Client(t, "127.0.0.2")
	resp, page := signIn(t, stranger, base, "ann@example.com", "ann's password")
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(page, "Verify it is you") || hasCookie(resp, sessionCookie) {
		t.Fatalf("new browser in attack mode: %d %s, want 202 verify and no session", resp.StatusCode, page)
	}
	// A wrong password gets the very same answer: the page must not tell
	// a stuffing run which passwords were right.
	guesser := xcloaktest.Client(t, "127.0.0.3")
	if resp, wrong := signIn(t, guesser, base, "ann@example.com", "not ann's password"); resp.StatusCode != http.StatusAccepted || wrong != page {
		t.Fatalf("a wrong password from a new browser in attack mode: %d %s, want the right one's 202 page", resp.StatusCode, wrong)
	}
	if resp, page := signIn(t, known, base, "ann@example.com", "ann's password"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("known browser in attack mode: %d %s, want 303", resp.StatusCode, page)
	}
}

func hasCookie(resp *http.Response, name string) bool {
	for _, c := range resp.Cookies() {
		if c.Name == name && c.Value != "" {
			return true
		}
	}
	return false
}

// TestRun starts the command as `go run ./examples/ownusers` would, with
// the key from the environment, signs in with the demo user it prints, and
// stops it.
func TestRun(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	getenv := map[string]string{"XCLOAK_URL": env.Start(t), "XCLOAK_API_KEY": env.AddAPIKey(t, "ownusers")}
	ctx, cancel := context.WithCancel(t.Context())
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-insecure-cookies"}, func(k string) string { return getenv[k] }, w)
		w.Close()
	}()
	lines := bufio.NewScanner(out)
	var base, password string
	for password == "" && lines.Scan() {
		line := lines.Text()
		if rest, ok := strings.CutPrefix(line, "ownusers listening on "); ok {
			base, _, _ = strings.Cut(rest, ",")
		}
		if rest, ok := strings.CutPrefix(line, "Demo user: "+demoUser+" / "); ok {
			password = rest
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if base == "" || password == "" {
		t.Fatalf("run printed no address or password")
	}
	if resp, page := signIn(t, xcloaktest.Client(t, "127.0.0.1"), base, demoUser, password); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("demo sign-in: %d %s, want 303", resp.StatusCode, page)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run = %v after its context ended, want nil", err)
	}
}

func TestRunWantsAKey(t *testing.T) {
	err := run(t.Context(), nil, func(string) string { return "" }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "XCLOAK_API_KEY") {
		t.Fatalf("run without a key = %v, want an error naming XCLOAK_API_KEY", err)
	}
}

// TestKnownBrowserIsNotLockedOut: a browser that signed in before keeps
// signing in while another one's guesses have the account refused.
func TestKnownBrowserIsNotLockedOut(t *testing.T) {
	env, base, _ := ownUsers(t)
	owner := xcloaktest.Client(t, "127.0.0.1")
	if resp, page := signIn(t, owner, base, "ann@example.com", "ann's password"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("owner's first sign-in: %d %s", resp.StatusCode, page)
	}
	// The attacker guesses until XCloak refuses: the account's limit,
	// which the owner's first sign-in counted in, comes before the lock.
	attacker := xcloaktest.Client(t, "127.0.0.2")
	denied := false
	for i := 0; i <= env.Auth.Lockout.Threshold && !denied; i++ {
		resp, page := signIn(t, attacker, base, "ann@example.com", "guess "+strconv.Itoa(i))
		denied = resp.StatusCode == http.StatusTooManyRequests
		if !denied && resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d %s, want 401 or 429", i+1, resp.StatusCode, page)
		}
	}
	if resp, _ := signIn(t, attacker, base, "ann@example.com", "ann's password"); !denied || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the attacker with the right password after the guesses: %d, want 429", resp.StatusCode)
	}
	if resp, page := signIn(t, owner, base, "ann@example.com", "ann's password"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the owner's known browser during the lockout: %d %s, want 303", resp.StatusCode, page)
	}
}

// TestOutcomeReportedWhenTheBrowserHangsUp: a browser that hangs up once
// its password has been checked still has its failure counted towards
// the lockout, as XCloak's own sign-in finishes that work: otherwise a
// guess that hangs up in time is never reported.
func TestOutcomeReportedWhenTheBrowserHangsUp(t *testing.T) {
	env, app := newApp(t)
	ctx, hangUp := context.WithCancel(t.Context())
	app.compare = func(hash, password []byte) error {
		hangUp()
		return bcrypt.CompareHashAndPassword(hash, password)
	}
	form := url.Values{"email": {"bob@example.com"}, "password": {"a guess"}}
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	app.Handler().ServeHTTP(httptest.NewRecorder(), r)

	env.Flush(t)
	events, err := env.Dashboard.Events(t.Context(), dashboard.EventFilter{Kinds: []string{auth.EventLoginFailed}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Account != "app ownusers bob@example.com" {
		t.Fatalf("failures recorded after the browser hung up: %+v, want bob's one", events)
	}
}

// TestOtherSitesCannotPostTheForms: another site's page cannot make a
// visitor's browser sign in (to an account of the page's choosing, or to
// guess from the visitor's address, where each visitor is a network of
// its own to XCloak) nor sign out: the forms refuse cross-site requests
// before XCloak is asked or a password compared.
func TestOtherSitesCannotPostTheForms(t *testing.T) {
	env, base, hashed := ownUsers(t)
	browser := xcloaktest.Client(t, "127.0.0.1")
	for _, path := range []string{"/login", "/logout"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+path,
			strings.NewReader(url.Values{"email": {"bob@example.com"}, "password": {"bob's password"}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || hasCookie(resp, sessionCookie) {
			t.Errorf("cross-site POST %s: %d, want 403 and no session", path, resp.StatusCode)
		}
	}
	if n := hashed.Load(); n != 0 {
		t.Errorf("cross-site sign-in compared %d passwords, want none", n)
	}
	env.Flush(t)
	events, err := env.Dashboard.Events(t.Context(), dashboard.EventFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Account == "app ownusers bob@example.com" {
			t.Errorf("cross-site sign-in reached XCloak: %s", e.Kind)
		}
	}
	// The app's own form still signs in.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/login",
		strings.NewReader(url.Values{"email": {"bob@example.com"}, "password": {"bob's password"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("same-origin sign-in: %d, want 303", resp.StatusCode)
	}
}

// TestSignOutRemovesTheCookie: signing out ends the session and has the
// browser drop its cookie, rather than keep an empty one.
func TestSignOutRemovesTheCookie(t *testing.T) {
	_, base, _ := ownUsers(t)
	browser := xcloaktest.Client(t, "127.0.0.1")
	if resp, page := signIn(t, browser, base, "ann@example.com", "ann's password"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, page)
	}
	resp, err := browser.PostForm(base+"/logout", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var removed bool
	for _, c := range resp.Cookies() {
		removed = removed || c.Name == sessionCookie && c.MaxAge < 0
	}
	if !removed {
		t.Errorf("sign-out's cookies %q, want %s removed (Max-Age=0)", resp.Header.Values("Set-Cookie"), sessionCookie)
	}
}

// TestSessionsEnd: a session ends on the server when its cookie would
// expire, whatever the browser keeps sending.
func TestSessionsEnd(t *testing.T) {
	_, app := newApp(t)
	now := time.Now()
	app.now = func() time.Time { return now }
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(srv.Close)
	browser := xcloaktest.Client(t, "127.0.0.1")
	resp, page := signIn(t, browser, srv.URL, "ann@example.com", "ann's password")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, page)
	}
	var token string
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			token = c.Value
		}
	}
	home := func() int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		// The cookie sent by hand, as a browser that keeps it past its
		// Max-Age (or a thief who copied it) would.
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: token})
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	now = now.Add(sessionTTL - time.Second)
	if got := home(); got != http.StatusOK {
		t.Fatalf("home just before the session's end: %d, want 200", got)
	}
	now = now.Add(time.Second)
	if got := home(); got != http.StatusSeeOther {
		t.Fatalf("home at the session's end: %d, want 303 to sign in", got)
	}
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
