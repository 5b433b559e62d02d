package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/ratelimit"
)

// wrongPasswordText is the one message for every failed sign-in.
const wrongPasswordText = "Email or password is incorrect."

// retryText matches the "too many attempts" message and captures when to
// retry: a number and its unit.
var retryText = regexp.MustCompile(`^Too many attempts\. Try again in (\d+) (seconds?|minutes?)\.$`)

// TestSignInAndOut: the right password lands on /account, which names the
// account; signing out returns to /login, and /account is closed again.
func TestSignInAndOut(t *testing.T) {
	env, base := startXCloak(t, xcloaktest.Options{})
	env.AddUser(t, "ada@example.com", "correct horse battery", false)
	page := newPage(t, "browser", desktop)

	signIn(t, page, base, "ada@example.com", "correct horse battery")
	wantText(t, page, "main dd.breakable", "ada@example.com")
	if sessionCookie(t, page) == "" {
		t.Fatal("signed in without a session cookie")
	}

	press(t, page, "Sign out")
	wantURL(t, page, base+"/login")
	wantText(t, page, "main h1", "Sign in")
	if got := sessionCookie(t, page); got != "" {
		t.Errorf("session cookie after signing out = %q, want none", got)
	}
	open(t, page, base+"/account")
	wantURL(t, page, base+"/login")
}

// TestWrongPasswordThenLimit: a wrong password and an unknown account get
// the same generic message; once the per-account limit is spent, the page
// says "too many attempts" and when to retry, even for the right password.
func TestWrongPasswordThenLimit(t *testing.T) {
	const attempts = 3
	window := 10 * time.Minute
	env, base := startXCloak(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.Limits[auth.RuleLoginAccount] = ratelimit.Limit{Count: attempts, Window: window}
	}})
	env.AddUser(t, "bob@example.com", "bob's real password", false)
	page := newPage(t, "browser", desktop)

	for _, email := range []string{"nobody@example.com", "bob@example.com"} {
		t.Run(email, func(t *testing.T) {
			for i := range attempts {
				submitLogin(t, page, base, email, fmt.Sprint("wrong guess ", i))
				wantURL(t, page, base+"/login")
				wantText(t, page, "main [role=alert]", wrongPasswordText)
				wantText(t, page, "main h1", "Sign in")
			}

			submitLogin(t, page, base, email, "bob's real password")
			wantText(t, page, "main [role=alert]", retryText)
			alert, err := page.Locator("main [role=alert]").InnerText()
			if err != nil {
				t.Fatal(err)
			}
			m := retryText.FindStringSubmatch(alert)
			if m == nil {
				t.Fatalf("limit message %q does not match %s", alert, retryText)
			}
			n, _ := strconv.Atoi(m[1])
			wait := time.Duration(n) * time.Second
			if m[2][0] == 'm' {
				wait = time.Duration(n) * time.Minute
			}
			if wait <= 0 || wait > window {
				t.Errorf("limit message says to wait %v; want a wait in (0, %v]", wait, window)
			}
			if got := sessionCookie(t, page); got != "" {
				t.Errorf("session cookie after a limited attempt = %q, want none", got)
			}
		})
	}
}
