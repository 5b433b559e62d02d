package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// lockAccount makes the lockout threshold's failures for email from a
// browser with no cookies, so that the account is locked; it returns the
// Retry-After of the first rejection.
func lockAccount(t *testing.T, env *xcloaktest.Env, base, source, email string) int {
	t.Helper()
	attacker := xcloaktest.Client(t, source)
	for i := range env.Auth.Lockout.Threshold {
		if resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON(email, fmt.Sprint("guess ", i))); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i, resp.StatusCode)
		}
	}
	resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON(email, "one more guess"))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("guess past the threshold: %d, want 429", resp.StatusCode)
	}
	n, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil {
		t.Fatalf("Retry-After %q: %v", resp.Header.Get("Retry-After"), err)
	}
	return n
}

// resetPassword sets a new password through the reset link, as its owner
// would.
func resetPassword(t *testing.T, env *xcloaktest.Env, base, email, password string) {
	t.Helper()
	c := xcloaktest.Client(t, "127.0.9.250")
	if resp, _ := post(t, c, base+"/api/v1/password-reset", jsonType, fmt.Sprintf(`{"email":%q}`, email)); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("reset request: %d", resp.StatusCode)
	}
	m := resetLink.FindStringSubmatch(env.Mail.WaitFor(t, email).Body)
	if m == nil {
		t.Fatal("no reset link in the mail")
	}
	set := url.Values{"password": {password}, "password_confirm": {password}}.Encode()
	if resp, _ := post(t, c, base+"/password-reset/"+m[1], formType, set); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("setting the new password: %d", resp.StatusCode)
	}
}

// deviceCookie returns the value of the device cookie c holds for base.
func deviceCookie(t *testing.T, env *xcloaktest.Env, c *http.Client, base, email string) string {
	t.Helper()
	u, _ := url.Parse(base)
	name := env.Service.DeviceCookieName(email)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == name {
			return ck.Value
		}
	}
	return ""
}

// TestDeviceCookiesRevokedByReset: three browsers sign in, then the
// password is reset. Their cookies no longer count as known devices: their
// failures count towards the account's lockout like any browser's, so
// together they get exactly the threshold of guesses, and a right password
// through one of them works as through an unknown browser, with a new
// cookie.
func TestDeviceCookiesRevokedByReset(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "old password", false)
	var browsers []*http.Client
	for i := range 3 {
		b := xcloaktest.Client(t, fmt.Sprintf("127.0.9.%d", i+1))
		signIn(t, b, base, "ann@example.com", "old password")
		browsers = append(browsers, b)
	}
	before := deviceCookie(t, env, browsers[2], base, "ann@example.com")
	resetPassword(t, env, base, "ann@example.com", "new password")

	signIn(t, browsers[2], base, "ann@example.com", "new password")
	if after := deviceCookie(t, env, browsers[2], base, "ann@example.com"); after == "" || after == before {
		t.Fatalf("sign-in through a revoked cookie kept it (%q); want a new device cookie", after)
	}
	guesses := 0
	for i := range 3 * env.Auth.Limits[auth.RuleLoginDevice].Count {
		resp, _ := post(t, browsers[i%2], base+"/api/v1/login", jsonType, loginJSON("ann@example.com", fmt.Sprint("guess ", i)))
		if resp.StatusCode == http.StatusTooManyRequests {
			break
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, resp.StatusCode)
		}
		guesses++
	}
	if guesses != env.Auth.Lockout.Threshold {
		t.Fatalf("two browsers with cookies from before the reset got %d guesses; want the lockout threshold, %d, as any browser", guesses, env.Auth.Lockout.Threshold)
	}
	for i, b := range browsers[:2] {
		if resp, _ := post(t, b, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "new password")); resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("browser %d with a revoked cookie during the lockout: %d, want 429", i, resp.StatusCode)
		}
	}
	// The browser that signed in after the reset is a known device again.
	signIn(t, browsers[2], base, "ann@example.com", "new password")
}

// TestDeviceLimitForgetsOldest: with room for three devices, a fourth
// browser's sign-in forgets the first; during a lockout the first is held
// like any browser, and the other three still sign in.
func TestDeviceLimitForgetsOldest(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.MaxDevices = 3
		c.Limits.SetCount(auth.RuleLoginAccount, 100)
	}})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	var browsers []*http.Client
	for i := range 4 {
		b := xcloaktest.Client(t, fmt.Sprintf("127.0.9.%d", 10+i))
		signIn(t, b, base, "ann@example.com", "the password")
		browsers = append(browsers, b)
	}
	lockAccount(t, env, base, "127.0.9.20", "ann@example.com")
	if resp, _ := post(t, browsers[0], base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "the password")); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("oldest of four devices during a lockout: %d, want 429 (forgotten)", resp.StatusCode)
	}
	for i, b := range browsers[1:] {
		if resp, _ := post(t, b, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "the password")); resp.StatusCode != http.StatusOK {
			t.Fatalf("device %d of the newest three during a lockout: %d, want 200", i+1, resp.StatusCode)
		}
	}
}

// TestDeviceLockedOnItsOwn: a known device that makes the threshold's
// failures is locked, even for the right password; the account's other
// device still signs in, and the account itself is not locked.
func TestDeviceLockedOnItsOwn(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginDevice, 100) }})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	stolen := xcloaktest.Client(t, "127.0.9.30")
	signIn(t, stolen, base, "ann@example.com", "the password")
	owner := xcloaktest.Client(t, "127.0.9.31")
	signIn(t, owner, base, "ann@example.com", "the password")

	for i := range env.Auth.Lockout.Threshold {
		if resp, _ := post(t, stolen, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", fmt.Sprint("guess ", i))); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d from a known device: %d, want 401", i, resp.StatusCode)
		}
	}
	resp, _ := post(t, stolen, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "the password"))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("device past the threshold, right password: %d, want 429 with Retry-After", resp.StatusCode)
	}
	signIn(t, owner, base, "ann@example.com", "the password")
	signIn(t, xcloaktest.Client(t, "127.0.9.32"), base, "ann@example.com", "the password")
}

// TestLimitedDeviceCookieQueriesNothing: a sign-in its network's limit
// is known to refuse costs no Postgres query, whatever device cookie it
// carries. A cookie this server signed keeps its MAC once its device is
// forgotten, so a client that signs in to an account of its own again and
// again collects as many as it likes, and could send a fresh one with
// every request past its limit: the table of devices is locked here, and
// a lookup would wait on that lock instead of answering 429.
//
// "Known" is the replica's memory of rejections, set long here so that it
// outlasts the test: one plain over-limit sign-in teaches it.
func TestLimitedDeviceCookieQueriesNothing(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.Limits.SetCount(auth.RuleLoginIP, 1)
		c.RejectionMemory = time.Hour
	}})
	base := env.Start(t)
	cookies := mallorysCookies(t, env, base, "127.0.9")
	flood := xcloaktest.Client(t, "127.0.9.49")
	if resp, _ := post(t, flood, base+"/api/v1/login", jsonType, loginJSON("mallory@example.com", "a guess")); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("first sign-in: %d, want 401", resp.StatusCode)
	}
	if resp, _ := post(t, flood, base+"/api/v1/login", jsonType, loginJSON("mallory@example.com", "a guess")); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a sign-in over its network's limit, without a cookie: %d, want 429", resp.StatusCode)
	}

	floodWithCookies(t, env, base, flood, "mallory@example.com", cookies, http.StatusTooManyRequests)
}

// mallorysCookies adds mallory's account, signs it in from three browsers
// on the /24 net and returns their device cookies: as many valid cookies
// as a client that signs in to an account of its own collects.
func mallorysCookies(t *testing.T, env *xcloaktest.Env, base, net string) []string {
	t.Helper()
	env.AddUser(t, "mallory@example.com", "her own password", false)
	var cookies []string
	for i := range 3 {
		b := xcloaktest.Client(t, fmt.Sprintf("%s.%d", net, 40+i))
		signIn(t, b, base, "mallory@example.com", "her own password")
		cookies = append(cookies, deviceCookie(t, env, b, base, "mallory@example.com"))
	}
	return cookies
}

// floodWithCookies sends a sign-in to email from the client flood with each
// of cookies while the table of devices is locked, and fails the test if
// one of them waits on that lock (a lookup of the cookie) or is answered
// other than want.
func floodWithCookies(t *testing.T, env *xcloaktest.Env, base string, flood *http.Client, email string, cookies []string, want int) {
	t.Helper()
	tx, err := env.DB.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), `LOCK TABLE devices IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	name := env.Service.DeviceCookieName(email)
	done := make(chan int, 1)
	go func() {
		for i, value := range cookies {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/api/v1/login",
				strings.NewReader(loginJSON(email, "her own password")))
			req.Header.Set("Content-Type", jsonType)
			req.Header.Set("Cookie", name+"="+value)
			resp, err := flood.Do(req)
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			if resp.StatusCode != want || i == len(cookies)-1 {
				done <- resp.StatusCode
				return
			}
		}
	}()
	for {
		select {
		case status := <-done:
			if status != want {
				t.Fatalf("a sign-in its limits refuse, with a device cookie: %d, want %d", status, want)
			}
			return
		default:
		}
		var waiting int
		if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%SELECT EXISTS (SELECT 1 FROM devices d %'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			tx.Rollback(t.Context())
			t.Fatalf("a sign-in its limits refuse looked its device cookie up in Postgres (answered %d once the table was free)", <-done)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSignOutEverywhere ends every session of the account and forgets
// its devices: during a lockout, a browser that signed in before is held
// like any other.
func TestSignOutEverywhere(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	browser := xcloaktest.Client(t, "127.0.9.40")
	signIn(t, browser, base, "ann@example.com", "the password")

	if err := env.Service.SignOutEverywhere(t.Context(), "ann@example.com", "cli"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, browser, base+"/account"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("/account after signing out everywhere: %d, want a redirect to sign in", resp.StatusCode)
	}
	lockAccount(t, env, base, "127.0.9.41", "ann@example.com")
	if resp, _ := post(t, browser, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "the password")); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("forgotten device during a lockout: %d, want 429", resp.StatusCode)
	}
}

// TestOwnerSignInLeavesLockAlone: while an attacker holds the account
// locked, its owner signs in from a known device. The attacker sees no
// change: the next guess is still 429 with a Retry-After that did not
// shrink beyond the time that passed. Failures short of the threshold are
// not forgotten either, whether the owner signs in from a known device or
// from a new browser.
func TestOwnerSignInLeavesLockAlone(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	owner := xcloaktest.Client(t, "127.0.9.50")
	signIn(t, owner, base, "ann@example.com", "the password")

	// Failures short of the threshold, then the owner signs in.
	attacker := xcloaktest.Client(t, "127.0.9.51")
	half := env.Auth.Lockout.Threshold / 2
	for i := range half {
		if resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", fmt.Sprint("early ", i))); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("early guess %d: %d", i, resp.StatusCode)
		}
	}
	signIn(t, owner, base, "ann@example.com", "the password")
	// And from a browser it never used, which becomes a known device.
	signIn(t, xcloaktest.Client(t, "127.0.9.52"), base, "ann@example.com", "the password")
	guesses := half
	for ; guesses < 3*env.Auth.Lockout.Threshold; guesses++ {
		resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", fmt.Sprint("late ", guesses)))
		if resp.StatusCode == http.StatusTooManyRequests {
			break
		}
	}
	if guesses != env.Auth.Lockout.Threshold {
		t.Fatalf("locked after %d failures around the owner's sign-in, want %d: the sign-in reset the count", guesses, env.Auth.Lockout.Threshold)
	}

	resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "another guess"))
	before, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	signIn(t, owner, base, "ann@example.com", "the password")
	resp, _ = post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "the password"))
	after, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("attacker after the owner's sign-in: %d, want 429", resp.StatusCode)
	}
	// Whole seconds: the lock may have crossed one boundary meanwhile.
	if after < before-1 {
		t.Fatalf("Retry-After went from %d to %d across the owner's sign-in", before, after)
	}
	// Another replica (no remembered rejection) sees the lock too.
	other := xcloaktest.New(t, xcloaktest.Options{DatabaseURL: env.DatabaseURL, Redis: env.Redis, Prefix: env.Prefix})
	otherBase := other.Start(t)
	if resp, _ := post(t, attacker, otherBase+"/api/v1/login", jsonType, loginJSON("ann@example.com", "the password")); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("attacker at another replica: %d, want 429", resp.StatusCode)
	}
}

// TestAdminSignsAccountOutEverywhere: the dashboard's form ends the
// account's sessions and forgets its devices; members, visitors and other
// sites cannot send it.
func TestAdminSignsAccountOutEverywhere(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	env.AddUser(t, memberEmail, anyPassword, false)
	admin := xcloaktest.Client(t, "127.0.9.60")
	signIn(t, admin, base, adminEmail, anyPassword)
	member := xcloaktest.Client(t, "127.0.9.61")
	signIn(t, member, base, memberEmail, anyPassword)
	if _, body := get(t, admin, base+"/admin"); !strings.Contains(body, `action="/admin/users/sign-out"`) {
		t.Fatal("the dashboard has no sign-out-everywhere form")
	}

	form := url.Values{"email": {memberEmail}, "period": {"1h"}}.Encode()
	for name, tc := range map[string]struct {
		c      *http.Client
		header []string
		status int
	}{
		"visitor":    {xcloaktest.Client(t, "127.0.9.62"), []string{"Sec-Fetch-Site", "same-origin"}, http.StatusSeeOther},
		"member":     {member, []string{"Sec-Fetch-Site", "same-origin"}, http.StatusForbidden},
		"cross-site": {admin, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
	} {
		resp, _ := post(t, tc.c, base+"/admin/users/sign-out", formType, form, tc.header...)
		if resp.StatusCode != tc.status || (tc.status == http.StatusSeeOther && resp.Header.Get("Location") != "/login") {
			t.Fatalf("%s: %d %s", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp, _ := get(t, member, base+"/account"); resp.StatusCode != http.StatusOK {
		t.Fatalf("member's session after refused sign-outs: %d", resp.StatusCode)
	}

	resp, _ := post(t, admin, base+"/admin/users/sign-out", formType, form, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin?notice=signed-out&period=1h" {
		t.Fatalf("admin sign-out: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	env.Flush(t)
	if _, body := get(t, admin, base+resp.Header.Get("Location")); !strings.Contains(body, "signed out everywhere") || !strings.Contains(body, "By administrator "+adminEmail) {
		t.Fatal("no notice or event after the sign-out")
	}
	if resp, _ := get(t, member, base+"/account"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("member's session after the sign-out: %d, want a redirect to sign in", resp.StatusCode)
	}
	lockAccount(t, env, base, "127.0.9.63", memberEmail)
	if resp, _ := post(t, member, base+"/api/v1/login", jsonType, loginJSON(memberEmail, anyPassword)); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("member's forgotten device during a lockout: %d, want 429", resp.StatusCode)
	}
	env.Flush(t)
	events, err := env.Dashboard.Events(t.Context(), dashboard.EventFilter{Kinds: []string{auth.EventSignedOutEverywhere}, Limit: 10})
	if err != nil || len(events) != 1 || events[0].Detail["by"] != "admin:"+adminEmail || events[0].Account != memberEmail {
		t.Fatalf("sign-out events: %+v (%v), want one by admin:%s", events, err, adminEmail)
	}

	resp, _ = post(t, admin, base+"/admin/users/sign-out", formType, url.Values{"email": {"nobody@example.com"}}.Encode(), "Sec-Fetch-Site", "same-origin")
	if resp.Header.Get("Location") != "/admin?notice=no-account&period=5m" {
		t.Fatalf("sign-out of an unknown account: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}
