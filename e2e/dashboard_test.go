package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// attackPace spaces the background attack's requests: steady traffic for
// the dashboard to show, not a flood that starves the browser of the
// machine's two cores.
const attackPace = 20 * time.Millisecond

// maxAttackRequests stops a background attack that nobody stopped.
const maxAttackRequests = 3000

// dashboardFigures reads, from the page as it is now, the rejected-requests
// counter and the rejected requests the chart shows (from the table that
// carries the chart's figures for screen readers).
const dashboardFigures = `() => {
	const num = s => parseInt((s || '0').replace(/[^0-9]/g, ''), 10) || 0;
	const counter = document.querySelector('[data-counter="rejected"]');
	let chart = 0;
	const section = document.querySelector('svg.chart')?.closest('section');
	for (const row of section ? section.querySelectorAll('table tbody tr') : []) {
		const cells = row.querySelectorAll('td');
		if (cells.length >= 2) chart += num(cells[1].textContent);
	}
	return {counter: counter ? num(counter.textContent) : -1, chart, bars: document.querySelectorAll('svg.chart .chart-bar').length, marker: window.e2eLoadMarker === true};
}`

// figures is what dashboardFigures returns. Marker is true while the page
// has not been reloaded since the test set it.
type figures struct {
	Counter int  `json:"counter"`
	Chart   int  `json:"chart"`
	Bars    int  `json:"bars"`
	Marker  bool `json:"marker"`
}

// readFigures returns the dashboard's figures as the page shows them.
func readFigures(t *testing.T, page playwright.Page) figures {
	t.Helper()
	var f figures
	evaluate(t, page, dashboardFigures, &f)
	return f
}

// backgroundAttack guesses wrong passwords for email from its own address
// until stop is called, which waits for it and fails the test if any
// request did not get an answer.
func backgroundAttack(t *testing.T, a *attacker, email string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var failure error
	wg.Go(func() {
		tick := time.NewTicker(attackPace)
		defer tick.Stop()
		for i := range maxAttackRequests {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			status, err := a.login(ctx, email, fmt.Sprint("guess ", i))
			if ctx.Err() != nil {
				return
			}
			if err == nil && status != http.StatusUnauthorized && status != http.StatusTooManyRequests {
				err = fmt.Errorf("status %d, want %d or %d", status, http.StatusUnauthorized, http.StatusTooManyRequests)
			}
			if err != nil {
				failure = fmt.Errorf("attack request %d: %w", i, err)
				return
			}
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			if failure != nil {
				t.Error(failure)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestDashboard: an administrator watches /admin while an attack runs in
// the background. Without a reload the rejected-requests counter and the
// chart rise and the lockout appears; Unlock lifts it, after which the
// owner signs in again. A signed-in user who is not an administrator gets
// 403.
func TestDashboard(t *testing.T) {
	const (
		admin    = "ops@example.com"
		member   = "mo@example.com"
		victim   = "vic@example.com"
		password = "a long enough password"
	)
	// The account limit is set out of reach so that, once unlocked, the
	// victim is held back by nothing.
	env, base := startXCloak(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 10000) }})
	env.AddUser(t, admin, password, true)
	env.AddUser(t, member, password, false)
	env.AddUser(t, victim, password, false)

	page := newPage(t, "admin", desktop)
	signIn(t, page, base, admin, password)
	follow(t, page, "Open the security dashboard")
	wantURL(t, page, base+"/admin")
	wantText(t, page, "main h1", "Security dashboard")
	wantText(t, page, `[data-live="lockouts"]`, "No accounts are locked out.")
	before := readFigures(t, page)
	if before.Counter != 0 || before.Chart != 0 || before.Bars != 0 {
		t.Fatalf("before the attack the dashboard shows %+v, want no rejections", before)
	}
	if _, err := page.Evaluate(`() => { window.e2eLoadMarker = true }`); err != nil {
		t.Fatal(err)
	}

	stop := backgroundAttack(t, newAttacker(t, base, "127.0.5.2"), victim)

	t.Run("figures rise without reload", func(t *testing.T) {
		lockoutRow := page.Locator(`[data-live="lockouts"] tbody tr`).Filter(playwright.LocatorFilterOptions{HasText: victim})
		if err := expect.Locator(lockoutRow).ToHaveCount(1); err != nil {
			t.Fatalf("lockout of %s on the dashboard: %v", victim, err)
		}
		// The page changes on its own, with no event to wait for, so the
		// test reads its figures until they have risen.
		var now figures
		for deadline := time.Now().Add(timeoutMS * time.Millisecond); ; time.Sleep(100 * time.Millisecond) {
			now = readFigures(t, page)
			if now.Counter > before.Counter && now.Chart > before.Chart && now.Bars > 0 {
				break
			}
			if time.Now().After(deadline) {
				html, _ := page.Locator("#live").InnerHTML()
				t.Fatalf("after %v the dashboard shows %+v, want more rejections than %+v; live region:\n%s", timeoutMS*time.Millisecond, now, before, html)
			}
		}
		after := readFigures(t, page)
		if !after.Marker {
			t.Errorf("the page was reloaded; it should update in place")
		}
		if page.URL() != base+"/admin" {
			t.Errorf("page moved to %s, want it to stay at %s", page.URL(), base+"/admin")
		}
		t.Logf("rejected: counter %d -> %d, chart %d -> %d (%d bars)", before.Counter, after.Counter, before.Chart, after.Chart, after.Bars)
		keepScreenshot(t, page, "dashboard")
	})

	stop()
	t.Run("unlock lifts the lockout", func(t *testing.T) {
		unlock := page.Locator(`[data-live="lockouts"]`).GetByRole(*playwright.AriaRoleButton, playwright.LocatorGetByRoleOptions{Name: "Unlock " + victim})
		if err := unlock.Click(); err != nil {
			t.Fatalf("clicking Unlock: %v", err)
		}
		wantText(t, page, "main .notice", "The lockout was lifted.")
		wantText(t, page, `[data-live="lockouts"]`, "No accounts are locked out.")
		wantText(t, page, `[data-counter="active_lockouts"]`, "0")

		owner := newPage(t, "owner", desktop)
		signIn(t, owner, base, victim, password)
	})

	t.Run("non-admin gets 403", func(t *testing.T) {
		other := newPage(t, "member", desktop)
		signIn(t, other, base, member, password)
		if status := open(t, other, base+"/admin"); status != http.StatusForbidden {
			t.Errorf("GET /admin as a member: status %d, want %d", status, http.StatusForbidden)
		}
		wantText(t, other, "main h1", "Forbidden")
		if err := expect.Locator(other.Locator("main")).ToContainText("This page is for administrators only."); err != nil {
			t.Error(err)
		}
		wantNone(t, other, "[data-counter]")
	})
}
