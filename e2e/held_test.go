package e2e

import (
	"testing"

	"github.com/xcloak/xcloak/auth"
)

// TestHeldCodeJourney: in attack mode, a new browser is held after its
// password, and its owner, who has an authenticator app, finishes on the
// held page with a code in place of the mailed link; the browser is then
// a known device, asked for its code, not held.
func TestHeldCodeJourney(t *testing.T) {
	env, base, clk := startMFAXCloak(t, func(c *auth.Config) { c.NotifyNewDevice = false })
	const email, password = "hal@example.test", "correct horse battery staple"
	env.AddUser(t, email, password, false)
	owner := newPage(t, "owner", desktop)
	signIn(t, owner, base, email, password)
	secret, _ := enrolInBrowser(t, owner, base, password, clk, false)
	if _, err := env.Attack.SwitchAttack(t.Context(), true, "test"); err != nil {
		t.Fatal(err)
	}

	page := newPage(t, "new browser", desktop)
	submitLogin(t, page, base, email, password)
	wantText(t, page, "main h1", "Check your email")
	wantText(t, page, "#held-code h2", "Or enter a code")
	if sessionCookie(t, page) != "" {
		t.Fatal("a session cookie on the held page")
	}
	keepScreenshot(t, page, "held-code")
	fill(t, page, "code", totpCode(t, secret, clk))
	press(t, page, "Sign in")
	wantURL(t, page, base+"/account")
	wantText(t, page, "main h1", "Your account")

	// Signed out, the browser is a known device: asked for its code, not
	// held, even in attack mode.
	clk.step()
	press(t, page, "Sign out")
	secondStep(t, page, base, email, password)
	fill(t, page, "code", totpCode(t, secret, clk))
	press(t, page, "Sign in")
	wantURL(t, page, base+"/account")
}
