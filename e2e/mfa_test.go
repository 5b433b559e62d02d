package e2e

import (
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"github.com/pquerna/otp/totp"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// mfaClock is the server's time in these journeys: codes are computed for
// it, and a journey moves it a TOTP step on rather than waiting.
type mfaClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *mfaClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *mfaClock) step() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(30 * time.Second)
}

func startMFAXCloak(t *testing.T, configure func(*auth.Config)) (*xcloaktest.Env, string, *mfaClock) {
	t.Helper()
	clk := &mfaClock{t: time.Unix(time.Now().Unix()/30*30+1, 0)}
	env, base := startXCloak(t, xcloaktest.Options{Now: clk.Now, Auth: configure})
	return env, base, clk
}

func totpCode(t *testing.T, secret string, clk *mfaClock) string {
	t.Helper()
	code, err := totp.GenerateCode(secret, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// enrolInBrowser enrols an authenticator app from the account page of a
// signed-in page, reading the key the page shows, and returns it and the
// recovery codes shown.
func enrolInBrowser(t *testing.T, page playwright.Page, base, password string, clk *mfaClock, shots bool) (secret string, recovery []string) {
	t.Helper()
	open(t, page, base+"/account")
	follow(t, page, "Authenticator app and recovery codes")
	wantURL(t, page, base+"/account/mfa")
	follow(t, page, "Set up an authenticator app")
	wantText(t, page, "main h1", "Set up an authenticator app")
	if err := expect.Locator(page.Locator("#totp-qr")).ToBeVisible(); err != nil {
		t.Fatalf("QR code not shown: %v", err)
	}
	natural, err := page.Locator("#totp-qr").Evaluate("img => img.naturalWidth", nil)
	if err != nil || natural == 0 {
		t.Fatalf("QR code did not load (naturalWidth %v, %v): the CSP must allow it", natural, err)
	}
	secret, err = page.Locator("#totp-secret").TextContent()
	if err != nil {
		t.Fatal(err)
	}
	if shots {
		keepScreenshot(t, page, "mfa-enrol")
	}
	fill(t, page, "code", totpCode(t, secret, clk))
	fill(t, page, "password", password)
	press(t, page, "Turn on")
	wantText(t, page, "main h1", "Your recovery codes")
	codes, err := page.Locator("ul.codes code").AllTextContents()
	if err != nil || len(codes) != auth.RecoveryCodes {
		t.Fatalf("recovery codes: %v, %v; want %d", codes, err, auth.RecoveryCodes)
	}
	follow(t, page, "Done")
	wantText(t, page, "#recovery-left", "10 unused recovery codes left.")
	clk.step()
	return secret, codes
}

// secondStep signs in with the password and lands on the second step.
func secondStep(t *testing.T, page playwright.Page, base, email, password string) {
	t.Helper()
	submitLogin(t, page, base, email, password)
	wantText(t, page, "main h1", "Enter your code")
}

// TestTOTPJourney: an owner enrols an authenticator app, signs in with a
// computed code, and with a recovery code once; the same recovery code
// again is refused.
func TestTOTPJourney(t *testing.T) {
	env, base, clk := startMFAXCloak(t, nil)
	const email, password = "tia@example.test", "correct horse battery staple"
	env.AddUser(t, email, password, false)
	page := newPage(t, "owner", desktop)
	signIn(t, page, base, email, password)
	secret, recovery := enrolInBrowser(t, page, base, password, clk, true)

	// Another browser: password, then the code.
	other := newPage(t, "other", desktop)
	secondStep(t, other, base, email, password)
	if sessionCookie(t, other) != "" {
		t.Fatal("a session cookie after the password alone")
	}
	keepScreenshot(t, other, "mfa-step")
	fill(t, other, "code", totpCode(t, secret, clk))
	press(t, other, "Sign in")
	wantURL(t, other, base+"/account")

	// A third: a recovery code, once.
	third := newPage(t, "recovery", desktop)
	secondStep(t, third, base, email, password)
	fill(t, third, "code", recovery[0])
	press(t, third, "Sign in")
	wantURL(t, third, base+"/account")
	fourth := newPage(t, "recovery-again", desktop)
	secondStep(t, fourth, base, email, password)
	fill(t, fourth, "code", recovery[0])
	press(t, fourth, "Sign in")
	wantText(t, fourth, ".problem", "That code is not right, or was used already. Try the current one.")
	if sessionCookie(t, fourth) != "" {
		t.Error("a used recovery code signed in")
	}
}

// TestSixthWrongCode: five wrong codes in a row are refused as wrong; the
// sixth gets "too many attempts", and so does the right code after it.
func TestSixthWrongCode(t *testing.T) {
	env, base, clk := startMFAXCloak(t, nil)
	const email, password = "ugo@example.test", "correct horse battery staple"
	env.AddUser(t, email, password, false)
	owner := newPage(t, "owner", desktop)
	signIn(t, owner, base, email, password)
	secret, _ := enrolInBrowser(t, owner, base, password, clk, false)

	page := newPage(t, "guesser", desktop)
	secondStep(t, page, base, email, password)
	wrong := "000000"
	if wrong == totpCode(t, secret, clk) {
		wrong = "111111"
	}
	for i := 1; i <= 5; i++ {
		fill(t, page, "code", wrong)
		press(t, page, "Sign in")
		wantText(t, page, ".problem", "That code is not right, or was used already. Try the current one.")
	}
	fill(t, page, "code", wrong)
	press(t, page, "Sign in")
	wantText(t, page, ".problem", regexp.MustCompile(`^Too many attempts\. Try again in `))
	fill(t, page, "code", totpCode(t, secret, clk))
	press(t, page, "Sign in")
	wantText(t, page, ".problem", regexp.MustCompile(`^Too many attempts\.`))
	if sessionCookie(t, page) != "" {
		t.Error("signed in while the second step was locked")
	}
}

// TestAdminWithoutFactorEnrols: with XCLOAK_ADMIN_MFA=required, an
// administrator without a factor who opens the dashboard is sent to enrol
// one, and reaches it once enrolled.
func TestAdminWithoutFactorEnrols(t *testing.T) {
	env, base, clk := startMFAXCloak(t, func(c *auth.Config) { c.MFA.Admins = auth.AdminMFARequired })
	const email, password = "ada@example.test", "correct horse battery staple"
	env.AddUser(t, email, password, true)
	page := newPage(t, "admin", desktop)
	signIn(t, page, base, email, password)
	open(t, page, base+"/admin")
	wantURL(t, page, base+"/account/mfa")
	wantText(t, page, "#mfa-required", "Administrators must set up a second factor before they can open the dashboard.")
	enrolInBrowser(t, page, base, password, clk, false)
	open(t, page, base+"/admin")
	wantURL(t, page, base+"/admin")
	if share, err := page.Locator("#factor-share").TextContent(); err != nil || !strings.HasPrefix(share, "100% of 1 account") {
		t.Errorf("factor share %q (%v); want 100%% of 1 account", share, err)
	}
}
