package e2e

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/templates"
	"github.com/xcloak/xcloak/web"
)

// Subjects of the owner's notices (auth/notify.go, auth/passwordchange.go).
const (
	newDeviceSubject       = "New sign-in to your XCloak account"
	passwordChangedSubject = "Your XCloak password was changed"
)

// laptop is a second browser of the account's owner, on another network
// and of another make than the test's Chromium, so the account page and
// the notices can tell the two apart. 203.0.113.0/24 is for documentation
// (RFC 5737).
var laptop = visitor{
	network:   "203.0.113.7",
	userAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0",
}

// laptopBrowser is how XCloak describes laptop's User-Agent.
const laptopBrowser = "Firefox on Windows"

// trustLoopbackProxy makes XCloak believe the X-Forwarded-For of requests
// from 127.0.0.1, as behind a proxy on the same machine, so a visitor's
// network is the one its page claims.
func trustLoopbackProxy(c *web.Config) {
	c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
}

// waitForNotice returns the next mail to email with the given subject,
// passing over the other mails that arrive before it (each sign-in of a
// new browser, for one, sends its own notice).
func waitForNotice(t *testing.T, env *xcloaktest.Env, email, subject string) testenv.Mail {
	t.Helper()
	for {
		m := env.Mail.WaitFor(t, email)
		if m.Subject == subject {
			return m
		}
	}
}

// sessionRows locates the rows of the account page's list of sessions.
func sessionRows(page playwright.Page) playwright.Locator {
	return page.Locator("main #sessions tbody tr")
}

// wantCount waits for locator to match n elements.
func wantCount(t *testing.T, page playwright.Page, locator playwright.Locator, n int) {
	t.Helper()
	if err := expect.Locator(locator).ToHaveCount(n); err != nil {
		t.Fatalf("on %s: want %d: %v", page.URL(), n, err)
	}
}

// wantSignedOut checks that the page's browser still holds a session
// cookie but that the server refuses it: /account sends it to /login.
func wantSignedOut(t *testing.T, page playwright.Page, base string) {
	t.Helper()
	if sessionCookie(t, page) == "" {
		t.Fatal("the browser lost its session cookie; the test would prove nothing")
	}
	open(t, page, base+"/account")
	wantURL(t, page, base+"/login")
	wantText(t, page, "main h1", "Sign in")
}

// TestChangePasswordEndsOtherSessions: the owner changes the password on
// /account/password; the laptop's session ends (its /account goes to
// /login) while this browser stays signed in, alone on the list; the
// password-changed notice arrives, with a reset link; the new password
// signs in and the old one does not.
func TestChangePasswordEndsOtherSessions(t *testing.T) {
	const (
		email       = "dee@example.com"
		oldPassword = "the password before"
		newPassword = "the password after the change"
	)
	env, base := startXCloak(t, xcloaktest.Options{Web: trustLoopbackProxy})
	env.AddUser(t, email, oldPassword, false)

	other := newPageOf(t, "laptop", desktop, laptop)
	signIn(t, other, base, email, oldPassword)
	page := newPage(t, "browser", desktop)
	signIn(t, page, base, email, oldPassword)
	wantCount(t, page, sessionRows(page), 2)

	follow(t, page, "Change your password")
	wantURL(t, page, base+"/account/password")
	wantText(t, page, "main h1", "Change your password")
	fill(t, page, "current-password", oldPassword)
	fill(t, page, "new-password", newPassword)
	fill(t, page, "password-confirm", newPassword)
	press(t, page, "Change password")
	wantURL(t, page, base+"/account?password=changed")
	wantText(t, page, "main [role=status]", templates.PasswordChangedText)
	wantCount(t, page, sessionRows(page), 1)
	wantText(t, page, "main #sessions tbody tr .current", "(this session)")

	t.Run("other session is gone", func(t *testing.T) {
		wantSignedOut(t, other, base)
	})
	t.Run("notice arrives", func(t *testing.T) {
		m := waitForNotice(t, env, email, passwordChangedSubject)
		if !strings.Contains(m.Body, "was changed") || !resetLink.MatchString(m.Body) {
			t.Errorf("password-changed notice does not say so with a reset link:\n%s", m.Body)
		}
	})
	t.Run("old password is refused", func(t *testing.T) {
		submitLogin(t, other, base, email, oldPassword)
		wantText(t, other, "main [role=alert]", wrongPasswordText)
	})
	t.Run("new password signs in", func(t *testing.T) {
		signIn(t, other, base, email, newPassword)
	})
}

// TestEndSessionFromList: the account page lists both browsers' sessions,
// this one marked; ending the laptop's from the list signs the laptop out
// and leaves this browser signed in.
func TestEndSessionFromList(t *testing.T) {
	const (
		email    = "fay@example.com"
		password = "fay's only password"
	)
	env, base := startXCloak(t, xcloaktest.Options{Web: trustLoopbackProxy})
	env.AddUser(t, email, password, false)

	other := newPageOf(t, "laptop", desktop, laptop)
	signIn(t, other, base, email, password)
	page := newPage(t, "browser", desktop)
	signIn(t, page, base, email, password)

	rows := sessionRows(page)
	wantCount(t, page, rows, 2)
	wantCount(t, page, page.Locator("main #devices tbody tr"), 2)
	laptopRow := rows.Filter(playwright.LocatorFilterOptions{HasText: laptopBrowser})
	wantCount(t, page, laptopRow, 1)
	if err := expect.Locator(laptopRow).ToContainText(laptop.network); err != nil {
		t.Fatalf("the laptop's row does not name its network: %v", err)
	}
	wantCount(t, page, rows.Filter(playwright.LocatorFilterOptions{HasText: "(this session)"}), 1)
	keepScreenshot(t, page, "account")

	end := laptopRow.GetByRole(*playwright.AriaRoleButton, playwright.LocatorGetByRoleOptions{Name: "End session", Exact: playwright.Bool(true)})
	if err := end.Click(); err != nil {
		t.Fatalf("clicking the laptop's End session: %v", err)
	}
	wantURL(t, page, base+"/account?session=ended")
	wantText(t, page, "main [role=status]", templates.SessionEndedText)
	wantCount(t, page, rows, 1)
	wantCount(t, page, laptopRow, 0)

	wantSignedOut(t, other, base)
	open(t, page, base+"/account")
	wantURL(t, page, base+"/account")
}

// TestSignOutEverywhereElse: "Sign out everywhere else" ends the
// laptop's session and keeps this one, which is then alone on the list,
// with the button gone.
func TestSignOutEverywhereElse(t *testing.T) {
	const (
		email    = "hal@example.com"
		password = "hal's only password"
	)
	env, base := startXCloak(t, xcloaktest.Options{Web: trustLoopbackProxy})
	env.AddUser(t, email, password, false)

	other := newPageOf(t, "laptop", desktop, laptop)
	signIn(t, other, base, email, password)
	page := newPage(t, "browser", desktop)
	signIn(t, page, base, email, password)
	wantCount(t, page, sessionRows(page), 2)

	press(t, page, "Sign out everywhere else")
	wantURL(t, page, base+"/account?sessions=ended")
	wantText(t, page, "main [role=status]", templates.OthersEndedText)
	wantCount(t, page, sessionRows(page), 1)
	wantText(t, page, "main #sessions tbody tr .current", "(this session)")
	wantNone(t, page, `main form[action="/account/sessions/end-others"]`)

	wantSignedOut(t, other, base)
}

// TestNewDeviceNotice: once the owner's usual browser is signed in, a
// sign-in from the laptop sends the owner a notice that names the
// laptop's network and browser, with a reset link for "not you".
func TestNewDeviceNotice(t *testing.T) {
	const (
		email    = "gil@example.com"
		password = "gil's own password"
	)
	env, base := startXCloak(t, xcloaktest.Options{Web: trustLoopbackProxy})
	env.AddUser(t, email, password, false)

	page := newPage(t, "browser", desktop)
	signIn(t, page, base, email, password)
	// The first browser is new too: take its notice first, so the next one
	// can only be the laptop's.
	first := waitForNotice(t, env, email, newDeviceSubject)
	if strings.Contains(first.Body, laptop.network) {
		t.Fatalf("the first browser's notice names the laptop's network:\n%s", first.Body)
	}

	other := newPageOf(t, "laptop", desktop, laptop)
	signIn(t, other, base, email, password)
	m := waitForNotice(t, env, email, newDeviceSubject)
	for _, want := range []string{laptopBrowser + ", network " + laptop.network, "Not you?"} {
		if !strings.Contains(m.Body, want) {
			t.Errorf("new-device notice does not contain %q:\n%s", want, m.Body)
		}
	}
	if !resetLink.MatchString(m.Body) {
		t.Errorf("new-device notice has no reset link:\n%s", m.Body)
	}
}

// TestActivityList: a wrong password typed on the laptop, then its
// sign-in, show in the owner's recent activity as a failed attempt from
// the laptop's network and a sign-in from a new device.
func TestActivityList(t *testing.T) {
	const (
		email    = "gus@example.com"
		password = "gus's only password"
	)
	env, base := startXCloak(t, xcloaktest.Options{Web: trustLoopbackProxy})
	env.AddUser(t, email, password, false)

	other := newPageOf(t, "laptop", desktop, laptop)
	submitLogin(t, other, base, email, "not gus's password")
	wantText(t, other, "main [role=alert]", wrongPasswordText)
	signIn(t, other, base, email, password)
	env.Flush(t)

	follow(t, other, "See recent security activity")
	wantURL(t, other, base+"/account/activity")
	wantText(t, other, "main h1", "Recent security activity")
	rows := other.Locator("main #activity tbody tr")
	for _, want := range []string{"Failed sign-in attempt", "Signed in from a new device"} {
		row := rows.Filter(playwright.LocatorFilterOptions{HasText: want})
		wantCount(t, other, row, 1)
		if err := expect.Locator(row).ToContainText(laptop.network); err != nil {
			t.Errorf("the %q row does not name the laptop's network: %v", want, err)
		}
	}
	newDevice := rows.Filter(playwright.LocatorFilterOptions{HasText: "Signed in from a new device"})
	if err := expect.Locator(newDevice).ToContainText(laptopBrowser); err != nil {
		t.Errorf("the sign-in row does not name the laptop's browser: %v", err)
	}
	keepScreenshot(t, other, "account-activity")
}
