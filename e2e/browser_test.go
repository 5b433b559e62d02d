package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// timeoutMS bounds every wait for the page: an action, a navigation, an
// assertion. It is generous because a failing wait costs only a slow
// failure, while a tight one makes a busy machine fail good code.
const timeoutMS = 30000

// Viewports: a desktop browser, and a phone (the logical size of a common
// one).
var (
	desktop = &playwright.Size{Width: 1280, Height: 800}
	phone   = &playwright.Size{Width: 390, Height: 844}
)

// expect holds assertions that retry until they pass or timeoutMS passes.
var expect = playwright.NewPlaywrightAssertions(timeoutMS)

// artifactsDir is where a failed test leaves what its pages showed;
// git ignores it.
const artifactsDir = "artifacts"

// startXCloak runs a whole XCloak for the test on a free port of 127.0.0.1,
// with its own database, Redis key prefix and SMTP sink, and returns it and
// its base URL.
func startXCloak(t *testing.T, o xcloaktest.Options) (*xcloaktest.Env, string) {
	t.Helper()
	env := xcloaktest.New(t, o)
	return env, env.Start(t)
}

// newPage opens a page in a new browser context, so it starts with no
// cookies, at the given viewport size. If the test fails, the page's
// screenshot and HTML are saved under artifacts/ as label.png and
// label.html, and the log names them.
func newPage(t *testing.T, label string, size *playwright.Size) playwright.Page {
	t.Helper()
	return newPageOf(t, label, size, visitor{})
}

// visitor is who a page's browser claims to be: the network a trusted
// proxy says it comes from and its User-Agent. The zero visitor is the
// test's Chromium, straight from 127.0.0.1.
type visitor struct {
	// network, when set, goes in X-Forwarded-For on every request; only an
	// XCloak that trusts 127.0.0.1 as a proxy (trustLoopbackProxy)
	// believes it.
	network string
	// userAgent, when set, replaces Chromium's User-Agent.
	userAgent string
}

// newPageOf is newPage for a page whose browser is v.
func newPageOf(t *testing.T, label string, size *playwright.Size, v visitor) playwright.Page {
	t.Helper()
	opts := playwright.BrowserNewContextOptions{
		Viewport:   size,
		Locale:     playwright.String("en-GB"),
		TimezoneId: playwright.String("UTC"),
	}
	if v.network != "" {
		opts.ExtraHttpHeaders = map[string]string{"X-Forwarded-For": v.network}
	}
	if v.userAgent != "" {
		opts.UserAgent = playwright.String(v.userAgent)
	}
	ctx, err := browser(t).NewContext(opts)
	if err != nil {
		t.Fatalf("new browser context: %v", err)
	}
	t.Cleanup(func() {
		if err := ctx.Close(); err != nil {
			t.Errorf("closing the browser context of %s: %v", label, err)
		}
	})
	ctx.SetDefaultTimeout(timeoutMS)
	page, err := ctx.NewPage()
	if err != nil {
		t.Fatalf("new page: %v", err)
	}
	// Cleanups run last-in first-out, so this runs while the context is
	// still open.
	t.Cleanup(func() {
		if t.Failed() {
			saveArtifacts(t, label, page)
		}
	})
	return page
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// saveArtifacts writes page's full-page screenshot and HTML under
// artifacts/<test name>/ and logs where.
func saveArtifacts(t *testing.T, label string, page playwright.Page) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join(artifactsDir, unsafeName.ReplaceAllString(t.Name(), "_")))
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		t.Logf("e2e: cannot keep the failure's artifacts: %v", err)
		return
	}
	base := filepath.Join(dir, unsafeName.ReplaceAllString(label, "_"))
	png, html := base+".png", base+".html"
	if _, err := page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(png), FullPage: playwright.Bool(true)}); err != nil {
		t.Logf("e2e: screenshot of %s: %v", label, err)
	}
	content, err := page.Content()
	if err == nil {
		err = os.WriteFile(html, []byte(content), 0o644)
	}
	if err != nil {
		t.Logf("e2e: HTML of %s: %v", label, err)
	}
	t.Logf("e2e: page %q was at %s when the test failed:\n\tscreenshot %s\n\tHTML       %s", label, page.URL(), png, html)
}

// open navigates to url and returns the response's status.
func open(t *testing.T, page playwright.Page, url string) int {
	t.Helper()
	resp, err := page.Goto(url)
	if err != nil {
		t.Fatalf("opening %s: %v", url, err)
	}
	if resp == nil {
		t.Fatalf("opening %s: no response", url)
	}
	return resp.Status()
}

// fill types value into the form field with the given id.
func fill(t *testing.T, page playwright.Page, id, value string) {
	t.Helper()
	if err := page.Locator("#" + id).Fill(value); err != nil {
		t.Fatalf("filling #%s: %v", id, err)
	}
}

// press clicks the button named name inside <main>. The site header has
// buttons of its own ("Sign out"), so the search stays in the page's body.
func press(t *testing.T, page playwright.Page, name string) {
	t.Helper()
	button := page.Locator("main").GetByRole(*playwright.AriaRoleButton, playwright.LocatorGetByRoleOptions{Name: name, Exact: playwright.Bool(true)})
	if err := button.Click(); err != nil {
		t.Fatalf("clicking %q: %v", name, err)
	}
}

// follow clicks the link named name inside <main>.
func follow(t *testing.T, page playwright.Page, name string) {
	t.Helper()
	link := page.Locator("main").GetByRole(*playwright.AriaRoleLink, playwright.LocatorGetByRoleOptions{Name: name, Exact: playwright.Bool(true)})
	if err := link.Click(); err != nil {
		t.Fatalf("following the link %q: %v", name, err)
	}
}

// submitLogin fills the sign-in form at base/login and sends it.
func submitLogin(t *testing.T, page playwright.Page, base, email, password string) {
	t.Helper()
	open(t, page, base+"/login")
	fill(t, page, "email", email)
	fill(t, page, "password", password)
	press(t, page, "Sign in")
}

// signIn signs in through the form and checks that it lands on /account.
func signIn(t *testing.T, page playwright.Page, base, email, password string) {
	t.Helper()
	submitLogin(t, page, base, email, password)
	wantURL(t, page, base+"/account")
	wantText(t, page, "main h1", "Your account")
}

// wantURL waits for the page to be at url: a string, matched whole, or a
// *regexp.Regexp.
func wantURL(t *testing.T, page playwright.Page, url any) {
	t.Helper()
	if err := expect.Page(page).ToHaveURL(url); err != nil {
		t.Fatalf("page at %s, want %v: %v", page.URL(), url, err)
	}
}

// wantText waits for the element selector matches to have text want (a
// string, matched whole, or a *regexp.Regexp).
func wantText(t *testing.T, page playwright.Page, selector string, want any) {
	t.Helper()
	if err := expect.Locator(page.Locator(selector)).ToHaveText(want); err != nil {
		t.Fatalf("%s on %s: %v", selector, page.URL(), err)
	}
}

// wantNone waits until nothing on the page matches selector.
func wantNone(t *testing.T, page playwright.Page, selector string) {
	t.Helper()
	if err := expect.Locator(page.Locator(selector)).ToHaveCount(0); err != nil {
		t.Fatalf("%s on %s: want none: %v", selector, page.URL(), err)
	}
}

// evaluate runs script, a JavaScript function returning a JSON-encodable
// value, in the page and decodes its result into out.
func evaluate(t *testing.T, page playwright.Page, script string, out any) {
	t.Helper()
	v, err := page.Evaluate("async () => JSON.stringify(await (" + script + ")())")
	if err != nil {
		t.Fatalf("evaluating in %s: %v", page.URL(), err)
	}
	s, ok := v.(string)
	if !ok {
		t.Fatalf("evaluating in %s: got %T, want a JSON string", page.URL(), v)
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		t.Fatalf("evaluating in %s: decoding %s: %v", page.URL(), s, err)
	}
}

// sessionCookie returns the value of the context's session cookie, "" if
// it has none.
func sessionCookie(t *testing.T, page playwright.Page) string {
	t.Helper()
	cookies, err := page.Context().Cookies()
	if err != nil {
		t.Fatalf("reading cookies: %v", err)
	}
	for _, c := range cookies {
		if c.Name == "xcloak_session" {
			return c.Value
		}
	}
	return ""
}
