package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// screenshotsEnv, set to 1, makes the tests rewrite the README's
// screenshots in docs/screenshots/; other runs leave the committed files
// alone.
const screenshotsEnv = "XCLOAK_E2E_SCREENSHOTS"

// screenshotsDir is where the README's screenshots live, from this
// package's folder.
var screenshotsDir = filepath.Join("..", "docs", "screenshots")

// keepScreenshot writes the page's full-page screenshot to
// docs/screenshots/<name>.png when XCLOAK_E2E_SCREENSHOTS=1.
func keepScreenshot(t *testing.T, page playwright.Page, name string) {
	t.Helper()
	if os.Getenv(screenshotsEnv) != "1" {
		return
	}
	path := filepath.Join(screenshotsDir, name+".png")
	if _, err := page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(path), FullPage: playwright.Bool(true)}); err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	t.Logf("wrote %s", path)
}

// checkLabelsAndHeading lists every form field without a label (a
// label[for] naming its id, or an aria-label) and a page that does not have
// exactly one h1.
const checkLabelsAndHeading = `() => {
	const problems = [];
	const skip = new Set(['hidden', 'submit', 'button', 'reset', 'image']);
	for (const el of document.querySelectorAll('input, select, textarea')) {
		if (skip.has(el.type)) continue;
		const label = el.id ? document.querySelector('label[for="' + CSS.escape(el.id) + '"]') : null;
		const text = (label ? label.textContent : el.getAttribute('aria-label') || '').trim();
		if (!text) problems.push('field without a label: ' + el.outerHTML);
	}
	const h1 = document.querySelectorAll('h1').length;
	if (h1 !== 1) problems.push(h1 + ' h1 elements, want exactly 1');
	return problems;
}`

// focusedElement describes the element that has focus and how its focus
// shows.
const focusedElement = `() => {
	const el = document.activeElement;
	if (!el || el === document.body || el === document.documentElement) return {tag: ''};
	const style = getComputedStyle(el);
	return {
		tag: el.tagName.toLowerCase(),
		type: el.type || '',
		name: el.id || el.getAttribute('href') || el.textContent.trim().slice(0, 40),
		outlineStyle: style.outlineStyle,
		outlineWidth: parseFloat(style.outlineWidth) || 0,
		boxShadow: style.boxShadow,
	};
}`

// focused is what focusedElement returns.
type focused struct {
	Tag          string  `json:"tag"`
	Type         string  `json:"type"`
	Name         string  `json:"name"`
	OutlineStyle string  `json:"outlineStyle"`
	OutlineWidth float64 `json:"outlineWidth"`
	BoxShadow    string  `json:"boxShadow"`
}

// visible reports whether the focus shows: an outline or a shadow.
func (f focused) visible() bool {
	return (f.OutlineStyle != "none" && f.OutlineWidth > 0) || (f.BoxShadow != "" && f.BoxShadow != "none")
}

// maxTabStops bounds the walk through a page's focusable elements; the
// pages have far fewer.
const maxTabStops = 40

// focusProblems presses Tab through the page's focusable elements, from
// the first until focus leaves the page or comes back round, and lists each
// one whose focus does not show. At least one link or form field must be
// reached.
func focusProblems(t *testing.T, page playwright.Page) []string {
	t.Helper()
	var problems []string
	reached, seen := false, map[focused]bool{}
	for range maxTabStops {
		if err := page.Keyboard().Press("Tab"); err != nil {
			t.Fatalf("pressing Tab: %v", err)
		}
		var f focused
		evaluate(t, page, focusedElement, &f)
		if f.Tag == "" || seen[f] {
			break
		}
		seen[f] = true
		if f.Tag == "a" || f.Tag == "input" {
			reached = true
		}
		if !f.visible() {
			problems = append(problems, fmt.Sprintf("focus does not show on <%s %s> %q: outline %s %vpx, box-shadow %s",
				f.Tag, f.Type, f.Name, f.OutlineStyle, f.OutlineWidth, f.BoxShadow))
		}
	}
	if !reached {
		problems = append(problems, fmt.Sprintf("Tab reached no link or form field; focused %d elements", len(seen)))
	}
	return problems
}

// labelProblems lists the fields without a label and a page that does not
// have exactly one h1.
func labelProblems(t *testing.T, page playwright.Page) []string {
	t.Helper()
	var problems []string
	evaluate(t, page, checkLabelsAndHeading, &problems)
	return problems
}

// pageWidth measures the page against its viewport and, when it is wider,
// names the elements where the overflow starts: those that reach past the
// viewport's right edge while their parent does not, outside any box that
// scrolls or clips sideways.
const pageWidth = `() => {
	const root = document.documentElement;
	const limit = root.clientWidth + 0.5;
	const describe = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
		[...el.classList].map(c => '.' + c).join('');
	// Content of a box that scrolls or clips sideways cannot widen the page.
	const clipped = el => {
		for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
			if (getComputedStyle(a).overflowX !== 'visible') return true;
		}
		return false;
	};
	const culprits = [];
	if (root.scrollWidth > root.clientWidth) {
		for (const el of document.body.querySelectorAll('*')) {
			const parent = el.parentElement;
			if (el.getBoundingClientRect().right > limit && parent && parent.getBoundingClientRect().right <= limit && !clipped(el)) {
				culprits.push(describe(parent) + ' > ' + describe(el));
			}
		}
	}
	return {scroll: root.scrollWidth, client: root.clientWidth, culprits: culprits.slice(0, 5)};
}`

// overflowProblems reports a page wider than its viewport, which a phone
// would scroll sideways.
func overflowProblems(t *testing.T, page playwright.Page) []string {
	t.Helper()
	var size struct {
		Scroll, Client int
		Culprits       []string
	}
	evaluate(t, page, pageWidth, &size)
	if size.Scroll > size.Client {
		return []string{fmt.Sprintf("page is %dpx wide in a %dpx viewport: it scrolls sideways; overflow starts at %s",
			size.Scroll, size.Client, strings.Join(size.Culprits, ", "))}
	}
	return nil
}

// report fails the test once for each problem.
func report(t *testing.T, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Error(p)
	}
}

// TestChecksCatchProblems shows that each page check finds the flaw it
// looks for and nothing on a page without it, so the checks in
// TestPagesAccessibleAndResponsive cannot pass for want of looking.
func TestChecksCatchProblems(t *testing.T) {
	const good = `<h1>Title</h1><label for="e">Email</label><input id="e"><a href="#x">link</a>`
	tests := []struct {
		name  string
		html  string
		check func(*testing.T, playwright.Page) []string
		want  int // how many problems
	}{
		{"labelled field and one h1", good, labelProblems, 0},
		{"field without a label", `<h1>Title</h1><input id="e" name="email">`, labelProblems, 1},
		{"field with an aria-label", `<h1>Title</h1><input aria-label="Email">`, labelProblems, 0},
		{"hidden and submit inputs need no label", `<h1>Title</h1><input type="hidden"><input type="submit">`, labelProblems, 0},
		{"no h1", `<label for="e">Email</label><input id="e">`, labelProblems, 1},
		{"two h1", `<h1>A</h1><h1>B</h1>`, labelProblems, 1},
		{"default focus ring", good, focusProblems, 0},
		{"focus ring removed", `<style>*:focus { outline: none }</style>` + good, focusProblems, 2},
		{"shadow instead of outline", `<style>*:focus { outline: none; box-shadow: 0 0 0 3px blue }</style>` + good, focusProblems, 0},
		{"nothing to focus", `<h1>Title</h1>`, focusProblems, 1},
		{"fits the phone", good, overflowProblems, 0},
		{"wider than the phone", `<div style="width: 800px">wide</div>`, overflowProblems, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := newPage(t, "page", phone)
			if err := page.SetContent(`<!DOCTYPE html><meta name="viewport" content="width=device-width">` + tt.html); err != nil {
				t.Fatal(err)
			}
			if got := tt.check(t, page); len(got) != tt.want {
				t.Errorf("got %d problems %q, want %d", len(got), got, tt.want)
			}
		})
	}
}

func TestPagesAccessibleAndResponsive(t *testing.T) {
	const (
		member      = "eve@example.com"
		admin       = "root@example.com"
		anyPassword = "a password for pages"
	)
	env, base := startXCloak(t, xcloaktest.Options{})
	env.AddUser(t, member, anyPassword, false)
	env.AddUser(t, admin, anyPassword, true)
	if err := env.Service.RequestReset(t.Context(), member, auth.Client{}); err != nil {
		t.Fatal(err)
	}
	token := resetToken(t, env, member)
	if err := env.Service.RequestUnlock(t.Context(), member, auth.Client{}); err != nil {
		t.Fatal(err)
	}
	unlock := unlockLink.FindStringSubmatch(waitForNotice(t, env, member, "Sign in to XCloak from a new browser").Body)
	if unlock == nil {
		t.Fatal("no unlock link in the mail")
	}

	pages := []struct {
		name   string // the subtest and, with shot, the screenshot's file name
		path   string
		as     string // who signs in first; "" for a visitor
		status int
		shot   bool
	}{
		{name: "login", path: "/login", status: http.StatusOK, shot: true},
		// TestEndSessionFromList keeps the account page's screenshot, taken
		// with a second browser's session on its list.
		{name: "account", path: "/account", as: member, status: http.StatusOK},
		{name: "account-password", path: "/account/password", as: member, status: http.StatusOK, shot: true},
		// TestTOTPJourney keeps the screenshots of enrolment and the second
		// step.
		{name: "account-mfa", path: "/account/mfa", as: member, status: http.StatusOK},
		{name: "account-mfa-totp", path: "/account/mfa/totp", as: member, status: http.StatusOK},
		{name: "reset-request", path: "/password-reset", status: http.StatusOK, shot: true},
		{name: "reset-confirm", path: "/password-reset/" + token, status: http.StatusOK, shot: true},
		{name: "reset-invalid", path: "/password-reset/no-such-token", status: http.StatusBadRequest},
		{name: "unlock-request", path: "/unlock", status: http.StatusOK},
		{name: "unlock-confirm", path: "/unlock/" + unlock[1], status: http.StatusOK},
		{name: "unlock-invalid", path: "/unlock/no-such-token", status: http.StatusBadRequest},
		// TestDashboard keeps the dashboard's screenshot, taken while an
		// attack shows on it.
		{name: "dashboard", path: "/admin", as: admin, status: http.StatusOK},
	}
	for _, p := range pages {
		t.Run(p.name, func(t *testing.T) {
			for _, size := range []*playwright.Size{desktop, phone} {
				label := p.name + "-desktop"
				if size == phone {
					label = p.name + "-phone"
				}
				page := newPage(t, label, size)
				if p.as != "" {
					signIn(t, page, base, p.as, anyPassword)
				}
				if got := open(t, page, base+p.path); got != p.status {
					t.Fatalf("%s: status %d, want %d", p.path, got, p.status)
				}
				wantURL(t, page, base+p.path)

				if size == phone {
					report(t, overflowProblems(t, page))
					continue
				}
				if p.shot {
					keepScreenshot(t, page, p.name)
				}
				report(t, labelProblems(t, page))
				report(t, focusProblems(t, page))
			}
		})
	}
}
