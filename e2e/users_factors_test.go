package e2e

import (
	"fmt"
	"regexp"
	"testing"
)

// TestAdminRemovesFactors: an administrator opens the page of an account
// with an authenticator app, sees the factor and the recovery codes left,
// and removes them; the owner is mailed, and signs in with the password
// alone.
func TestAdminRemovesFactors(t *testing.T) {
	env, base, clk := startMFAXCloak(t, nil)
	const admin, owner, password = "ops@example.test", "lou@example.test", "correct horse battery staple"
	env.AddUser(t, admin, password, true)
	u := env.AddUser(t, owner, password, false)

	mine := newPage(t, "owner", desktop)
	signIn(t, mine, base, owner, password)
	_, recovery := enrolInBrowser(t, mine, base, password, clk, false)
	// One recovery code spent from another browser: nine left.
	spent := newPage(t, "recovery", desktop)
	secondStep(t, spent, base, owner, password)
	fill(t, spent, "code", recovery[0])
	press(t, spent, "Sign in")
	wantURL(t, spent, base+"/account")

	page := newPage(t, "admin", desktop)
	signIn(t, page, base, admin, password)
	open(t, page, fmt.Sprintf("%s/admin/users/%d", base, u.ID))
	wantText(t, page, "main h1", owner)
	wantText(t, page, "#user-factors", regexp.MustCompile(`Authenticator app\s*, added .*9 recovery codes left`))
	press(t, page, "Remove second factors")
	wantText(t, page, "main [role=status]", "The account's second factors and recovery codes were removed; its owner was mailed.")
	wantText(t, page, "#user-factors", "None")

	m := waitForNotice(t, env, owner, "Your XCloak second factors were removed")
	if !regexp.MustCompile(`An administrator removed every second factor and recovery code`).MatchString(m.Body) {
		t.Errorf("mail to the owner: %s", m.Body)
	}

	// A new browser signs in with the password alone.
	later := newPage(t, "owner-later", desktop)
	signIn(t, later, base, owner, password)
	wantURL(t, later, base+"/account")
}
