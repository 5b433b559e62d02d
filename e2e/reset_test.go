package e2e

import (
	"regexp"
	"testing"
	"time"

	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/templates"
)

// resetLink finds the reset token in a reset mail. Links point at the
// public URL xcloaktest configures, not at the test server, so the tests
// open base+"/password-reset/"+token themselves.
var resetLink = regexp.MustCompile(`https://login\.example\.test/password-reset/([A-Za-z0-9_-]+)`)

// resetToken waits for the next reset mail to email, passing over the
// notices (a new device's carries a reset link too), and returns its token.
func resetToken(t *testing.T, env *xcloaktest.Env, email string) string {
	t.Helper()
	m := waitForNotice(t, env, email, "Reset your XCloak password")
	found := resetLink.FindStringSubmatch(m.Body)
	if found == nil {
		t.Fatalf("reset mail %q has no link matching %s:\n%s", m.Subject, resetLink, m.Body)
	}
	return found[1]
}

// TestForgotPassword: the whole reset by mail. The link from the caught
// mail sets a new password that signs in; the session another browser had
// is gone; the old password no longer works; the link does not work twice.
func TestForgotPassword(t *testing.T) {
	const (
		email       = "cy@example.com"
		oldPassword = "the old password"
		newPassword = "a brand new password"
	)
	env, base := startXCloak(t, xcloaktest.Options{})
	env.AddUser(t, email, oldPassword, false)

	// Another browser signed in before the reset, e.g. a stolen session.
	other := newPage(t, "other-browser", desktop)
	signIn(t, other, base, email, oldPassword)

	page := newPage(t, "browser", desktop)
	open(t, page, base+"/login")
	follow(t, page, "Forgot your password?")
	wantURL(t, page, base+"/password-reset")
	wantText(t, page, "main h1", "Reset your password")
	fill(t, page, "email", email)
	press(t, page, "Send reset link")
	wantText(t, page, "main [role=status]", templates.ResetSentText(30*time.Minute))

	token := resetToken(t, env, email)
	link := base + "/password-reset/" + token
	open(t, page, link)
	wantText(t, page, "main h1", "Choose a new password")
	fill(t, page, "password", newPassword)
	fill(t, page, "password-confirm", newPassword)
	press(t, page, "Change password")
	wantURL(t, page, base+"/login?reset=done")
	wantText(t, page, "main [role=status]", "Your password was changed. Sign in with the new one.")

	fill(t, page, "email", email)
	fill(t, page, "password", newPassword)
	press(t, page, "Sign in")
	wantURL(t, page, base+"/account")

	t.Run("old session is gone", func(t *testing.T) {
		// The cookie is still there: the server must refuse it.
		if sessionCookie(t, other) == "" {
			t.Fatal("the other browser lost its session cookie; the test would prove nothing")
		}
		open(t, other, base+"/account")
		wantURL(t, other, base+"/login")
	})
	t.Run("old password is refused", func(t *testing.T) {
		submitLogin(t, other, base, email, oldPassword)
		wantText(t, other, "main [role=alert]", wrongPasswordText)
	})
	t.Run("link works once", func(t *testing.T) {
		if status := open(t, page, link); status != 400 {
			t.Errorf("second visit of the link: status %d, want 400", status)
		}
		wantText(t, page, "main [role=alert]", templates.ResetInvalidText+" Request a new one.")
		wantNone(t, page, "main form")
	})
}
