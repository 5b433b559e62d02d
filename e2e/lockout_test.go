package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/templates"
)

// attacker is a plain HTTP client guessing passwords through the JSON API
// from a loopback address of its own, so its attempts count against that
// address and not against the browsers' 127.0.0.1.
type attacker struct {
	client *http.Client
	base   string
}

func newAttacker(t *testing.T, base, source string) *attacker {
	t.Helper()
	return &attacker{client: xcloaktest.Client(t, source), base: base}
}

// login sends one sign-in and returns the response's status. It reports
// errors rather than failing the test so that it can run in a goroutine.
func (a *attacker) login(ctx context.Context, email, password string) (int, error) {
	body, err := json.Marshal(map[string]string{"email": email, "password": password})
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/api/v1/login", strings.NewReader(string(body)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// lockOut guesses wrong passwords for email until the lockout threshold is
// reached, then checks that even the right password is refused.
func (a *attacker) lockOut(t *testing.T, env *xcloaktest.Env, email, password string) {
	t.Helper()
	for i := range env.Auth.Lockout.Threshold {
		status, err := a.login(t.Context(), email, fmt.Sprint("guess ", i))
		if err != nil {
			t.Fatalf("attacker's guess %d: %v", i, err)
		}
		if status != http.StatusUnauthorized {
			t.Fatalf("attacker's guess %d: status %d, want %d", i, status, http.StatusUnauthorized)
		}
	}
	status, err := a.login(t.Context(), email, password)
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusTooManyRequests {
		t.Fatalf("the right password from the attacker during the lockout: status %d, want %d", status, http.StatusTooManyRequests)
	}
}

// TestLockoutSparesKnownBrowser: while an attacker holds the account
// locked, the browser that signed in before still signs in with its device
// cookie; a fresh browser context, with the right password too, gets the
// "too many attempts" page.
func TestLockoutSparesKnownBrowser(t *testing.T) {
	const (
		email    = "dee@example.com"
		password = "dee's own password"
	)
	// The account limit is set out of reach so that what holds the fresh
	// browser back is the lockout.
	env, base := startXCloak(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	env.AddUser(t, email, password, false)

	known := newPage(t, "known-browser", desktop)
	signIn(t, known, base, email, password)
	press(t, known, "Sign out")
	wantURL(t, known, base+"/login")

	newAttacker(t, base, "127.0.4.2").lockOut(t, env, email, password)
	locks, err := env.Service.ActiveLockouts(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != 1 || locks[0].Account != email {
		t.Fatalf("active lockouts = %+v, want one for %s", locks, email)
	}

	t.Run("fresh browser is refused", func(t *testing.T) {
		fresh := newPage(t, "fresh-browser", desktop)
		submitLogin(t, fresh, base, email, password)
		wantURL(t, fresh, base+"/login")
		wantText(t, fresh, "main [role=alert]", retryText)
		if got := sessionCookie(t, fresh); got != "" {
			t.Errorf("session cookie of the fresh browser = %q, want none", got)
		}
	})
	t.Run("known browser signs in", func(t *testing.T) {
		signIn(t, known, base, email, password)
	})
}

// unlockLink finds the token in an unlock mail; like reset links, it
// points at the public URL xcloaktest configures.
var unlockLink = regexp.MustCompile(`https://login\.example\.test/unlock/([A-Za-z0-9_-]+)`)

// TestUnlockLinkLetsNewBrowserIn: while an attacker holds the account
// locked, its owner, in a browser that never signed in, follows "Locked
// out? Email me a link", opens the mailed link, presses its button and
// then signs in. The attacker is still refused.
func TestUnlockLinkLetsNewBrowserIn(t *testing.T) {
	const (
		email    = "fay@example.com"
		password = "fay's own password"
	)
	env, base := startXCloak(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	env.AddUser(t, email, password, false)
	attacker := newAttacker(t, base, "127.0.4.3")
	attacker.lockOut(t, env, email, password)

	page := newPage(t, "locked-out-owner", desktop)
	submitLogin(t, page, base, email, password)
	wantText(t, page, "main [role=alert]", retryText)
	follow(t, page, "Locked out? Email me a link")
	wantURL(t, page, base+"/unlock")
	fill(t, page, "email", email)
	press(t, page, "Email me a link")
	wantText(t, page, "main [role=status]", templates.UnlockSentText(30*time.Minute))

	// The lockout's own notice, which carries an unlock link too, comes
	// first: this is the link the page asked for.
	m := unlockLink.FindStringSubmatch(waitForNotice(t, env, email, "Sign in to XCloak from a new browser").Body)
	if m == nil {
		t.Fatal("no unlock link in the mail")
	}
	open(t, page, base+"/unlock/"+m[1])
	wantText(t, page, "main h1", "Sign in from this browser")
	press(t, page, "Use this browser")
	wantURL(t, page, base+"/login?unlock=done")
	fill(t, page, "email", email)
	fill(t, page, "password", password)
	press(t, page, "Sign in")
	wantURL(t, page, base+"/account")

	if status, err := attacker.login(t.Context(), email, password); err != nil || status != http.StatusTooManyRequests {
		t.Fatalf("attacker after the owner came in: %d (%v), want %d", status, err, http.StatusTooManyRequests)
	}
}
