package e2e

import (
	"fmt"
	"net"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/web"
)

// startPasskeyXCloak serves XCloak at http://localhost:PORT, its public
// URL: WebAuthn needs a secure context, which http://localhost is and
// http://127.0.0.1 is not, and an RP ID that is a domain name, so these
// journeys cannot use startXCloak's 127.0.0.1.
func startPasskeyXCloak(t *testing.T, configure func(*auth.Config)) (*xcloaktest.Env, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	public, err := url.Parse(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	env := xcloaktest.New(t, xcloaktest.Options{
		Auth: func(c *auth.Config) {
			c.PublicURL = public
			if configure != nil {
				configure(c)
			}
		},
		Web: func(c *web.Config) { c.PublicURL = public },
	})
	srv := httptest.NewUnstartedServer(env.Handler)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	env.URL = base
	return env, base
}

// virtualAuthenticator gives page's browser a platform authenticator that
// keeps discoverable credentials and verifies its user at once, through
// Chromium's WebAuthn domain of the DevTools protocol.
func virtualAuthenticator(t *testing.T, page playwright.Page) {
	t.Helper()
	cdp, err := page.Context().NewCDPSession(page)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cdp.Send("WebAuthn.enable", map[string]any{"enableUI": false}); err != nil {
		t.Fatalf("WebAuthn.enable: %v", err)
	}
	if _, err := cdp.Send("WebAuthn.addVirtualAuthenticator", map[string]any{"options": map[string]any{
		"protocol": "ctap2", "transport": "internal", "hasResidentKey": true,
		"hasUserVerification": true, "isUserVerified": true, "automaticPresenceSimulation": true,
	}}); err != nil {
		t.Fatalf("WebAuthn.addVirtualAuthenticator: %v", err)
	}
}

// enrolPasskey registers a passkey named name from the account page of a
// signed-in page and returns the recovery codes shown, if any.
func enrolPasskey(t *testing.T, page playwright.Page, base, password, name string, shots bool) []string {
	t.Helper()
	open(t, page, base+"/account/mfa")
	follow(t, page, "Add a passkey")
	wantURL(t, page, base+"/account/mfa/passkey")
	wantText(t, page, "main h1", "Add a passkey")
	fill(t, page, "passkey-name", name)
	fill(t, page, "passkey-password", password)
	if shots {
		keepScreenshot(t, page, "passkey-enrol")
	}
	press(t, page, "Add a passkey")
	wantText(t, page, "main h1", "Your recovery codes")
	wantText(t, page, "main .notice", "Your passkey is set up.")
	codes, err := page.Locator("ul.codes code").AllTextContents()
	if err != nil {
		t.Fatal(err)
	}
	follow(t, page, "Done")
	wantText(t, page, "#factors tbody td >> nth=0", name)
	return codes
}

// newBrowser forgets page's cookies, so that it comes back as a browser
// XCloak has never seen, its authenticator kept.
func newBrowser(t *testing.T, page playwright.Page) {
	t.Helper()
	if err := page.Context().ClearCookies(); err != nil {
		t.Fatal(err)
	}
}

// TestPasskeyJourney: an owner registers a passkey; a new browser then
// signs in with the password and the passkey as its second step, and
// another with the passkey alone.
func TestPasskeyJourney(t *testing.T) {
	env, base := startPasskeyXCloak(t, nil)
	const email, password = "pia@example.test", "correct horse battery staple"
	env.AddUser(t, email, password, false)
	page := newPage(t, "owner", desktop)
	virtualAuthenticator(t, page)
	signIn(t, page, base, email, password)
	if codes := enrolPasskey(t, page, base, password, "Laptop", true); len(codes) != auth.RecoveryCodes {
		t.Fatalf("%d recovery codes with the first factor, want %d", len(codes), auth.RecoveryCodes)
	}

	// The password, then the passkey.
	newBrowser(t, page)
	submitLogin(t, page, base, email, password)
	wantText(t, page, "main h1", "Enter your code")
	if sessionCookie(t, page) != "" {
		t.Fatal("a session cookie after the password alone")
	}
	press(t, page, "Use a passkey")
	wantURL(t, page, base+"/account")
	wantText(t, page, "main h1", "Your account")

	// The passkey alone.
	newBrowser(t, page)
	open(t, page, base+"/login")
	press(t, page, "Sign in with a passkey")
	wantURL(t, page, base+"/account")
	wantText(t, page, "main dd.breakable", email)
}

// TestPasskeyWithoutLinkWhenVerifying: while every new browser must finish
// a password sign-in from a mailed link, a passkey alone signs one in: it
// proves the device and cannot be phished.
func TestPasskeyWithoutLinkWhenVerifying(t *testing.T) {
	env, base := startPasskeyXCloak(t, nil)
	const email, password = "quy@example.test", "correct horse battery staple"
	env.AddUser(t, email, password, false)
	page := newPage(t, "owner", desktop)
	virtualAuthenticator(t, page)
	signIn(t, page, base, email, password)
	enrolPasskey(t, page, base, password, "Phone", false)

	if _, err := env.Attack.SwitchAttack(t.Context(), true, "test"); err != nil {
		t.Fatal(err)
	}
	newBrowser(t, page)
	open(t, page, base+"/login")
	press(t, page, "Sign in with a passkey")
	wantURL(t, page, base+"/account")
}
