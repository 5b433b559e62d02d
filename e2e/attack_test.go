package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// signInLink finds the token of a new-device verification mail's link.
var signInLink = regexp.MustCompile(`https://login\.example\.test/sign-in/([A-Za-z0-9_-]+)`)

// stuffingSources is how many loopback addresses the simulated botnet
// uses, each for two attempts, spread over as many /24s.
const stuffingSources = 40

// stuff runs a credential-stuffing burst: each of stuffingSources
// addresses tries two entries of a leaked list, emails that have no
// account here each with its own password, as a botnet does. It waits for every answer and fails the
// test on any that is not a refusal or a held sign-in.
func stuff(t *testing.T, base string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, stuffingSources)
	for i := range stuffingSources {
		a := newAttacker(t, base, fmt.Sprintf("127.%d.%d.%d", 20+i/250, i%250, 7))
		wg.Go(func() {
			for j := range 2 {
				status, err := a.login(context.WithoutCancel(t.Context()), fmt.Sprintf("leaked-%d-%d@example.net", i, j), fmt.Sprintf("their password %d-%d", i, j))
				if err == nil && status != http.StatusUnauthorized && status != http.StatusAccepted && status != http.StatusTooManyRequests {
					err = fmt.Errorf("status %d", status)
				}
				if err != nil {
					errs <- fmt.Errorf("stuffing from source %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestAttackJourney: a credential-stuffing burst switches attack mode on,
// which the dashboard shows at once. During it a browser that signed in
// before signs in as usual; a new browser with the right password gets the
// "check your email" page and no session, and the link from the mail,
// opened in that browser, signs it in.
func TestAttackJourney(t *testing.T) {
	const (
		admin     = "sec@example.com"
		returning = "ret@example.com"
		newcomer  = "neo@example.com"
		password  = "a long enough password"
	)
	env, base := startXCloak(t, xcloaktest.Options{Attack: xcloaktest.DetectAttacks})
	env.AddUser(t, admin, password, true)
	env.AddUser(t, returning, password, false)
	env.AddUser(t, newcomer, password, false)

	// Before the attack: the returning user's browser signs in once, which
	// makes it a known device, and signs out.
	back := newPage(t, "returning-browser", desktop)
	signIn(t, back, base, returning, password)
	press(t, back, "Sign out")
	wantURL(t, back, base+"/login")

	dash := newPage(t, "admin", desktop)
	signIn(t, dash, base, admin, password)
	open(t, dash, base+"/admin")
	wantNone(t, dash, "#attack-banner")
	// Both browsers are known from before the attack, not from the
	// moments before it, whose new browsers attack mode signs out.
	env.Backdate(t, returning, time.Hour)
	env.Backdate(t, admin, time.Hour)

	stuff(t, base)

	// The live dashboard shows the banner without a reload.
	wantText(t, dash, "#attack-banner", regexp.MustCompile(`Attack mode is on`))
	wantText(t, dash, "#attack-panel", regexp.MustCompile(`127\.20\.`))

	// The returning browser signs in at once.
	signIn(t, back, base, returning, password)

	// A new browser with the right password is held and has no session.
	fresh := newPage(t, "new-browser", desktop)
	submitLogin(t, fresh, base, newcomer, password)
	wantText(t, fresh, "#verification-sent h1", "Check your email")
	if got := sessionCookie(t, fresh); got != "" {
		t.Fatalf("a held sign-in set a session cookie %q", got)
	}
	m := env.Mail.WaitFor(t, newcomer)
	found := signInLink.FindStringSubmatch(m.Body)
	if found == nil {
		t.Fatalf("verification mail %q has no link matching %s:\n%s", m.Subject, signInLink, m.Body)
	}
	open(t, fresh, base+"/sign-in/"+found[1])
	wantText(t, fresh, "main h1", "Finish signing in")
	if err := fresh.Locator("#verify-confirm").Click(); err != nil {
		t.Fatal(err)
	}
	wantURL(t, fresh, base+"/account")
	wantText(t, fresh, "main dd.breakable", newcomer)

	// Next time, that browser's password is enough, attack or not.
	press(t, fresh, "Sign out")
	signIn(t, fresh, base, newcomer, password)

	// The panel, still live, counts the held sign-in.
	wantText(t, dash, `#attack-panel [data-counter="attack_held"]`, "1")
	keepElementScreenshot(t, dash, "#attack-panel", "attack-panel")
}

// keepElementScreenshot writes the screenshot of the element selector
// picks to docs/screenshots/<name>.png when XCLOAK_E2E_SCREENSHOTS=1.
func keepElementScreenshot(t *testing.T, page playwright.Page, selector, name string) {
	t.Helper()
	if os.Getenv(screenshotsEnv) != "1" {
		return
	}
	path := filepath.Join(screenshotsDir, name+".png")
	if _, err := page.Locator(selector).Screenshot(playwright.LocatorScreenshotOptions{Path: playwright.String(path)}); err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	t.Logf("wrote %s", path)
}
