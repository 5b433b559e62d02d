package e2e

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestUserManagement: an administrator finds an account from the Users
// link, disables it, and its owner's sign-in then fails as a wrong
// password does; enabled again, the owner signs in; the administrator
// deletes it after a confirmation page. As the only administrator, they
// cannot demote themself.
func TestUserManagement(t *testing.T) {
	const (
		admin    = "ops@example.com"
		owner    = "olga@example.com"
		password = "a long enough password"
	)
	env, base := startXCloak(t, xcloaktest.Options{})
	env.AddUser(t, admin, password, true)
	env.AddUser(t, owner, password, false)
	oscar := env.AddUser(t, "oscar@example.com", password, false)

	page := newPage(t, "admin", desktop)
	signIn(t, page, base, admin, password)
	users := page.Locator("header").GetByRole(*playwright.AriaRoleLink, playwright.LocatorGetByRoleOptions{Name: "Users", Exact: playwright.Bool(true)})
	if err := users.Click(); err != nil {
		t.Fatalf("following the Users link: %v", err)
	}
	wantURL(t, page, base+"/admin/users")
	wantText(t, page, "main h1", "Users")
	fill(t, page, "user-query", "OL")
	press(t, page, "Search")
	wantURL(t, page, base+"/admin/users?q=OL")
	wantText(t, page, "#users tbody td:first-child", []string{owner})
	keepScreenshot(t, page, "users")
	report(t, labelProblems(t, page))
	report(t, focusProblems(t, page))
	follow(t, page, owner)
	wantText(t, page, "main h1", owner)

	press(t, page, "Disable")
	wantText(t, page, "main [role=status]", regexp.MustCompile("The account is disabled"))
	wantText(t, page, "#user-state dd:nth-of-type(2)", "Disabled")
	// Events are written a moment later: the page, reloaded, lists the
	// disabling.
	env.Flush(t)
	if _, err := page.Reload(); err != nil {
		t.Fatal(err)
	}
	wantText(t, page, "#user-events tbody tr:first-child td:nth-child(2)", "Account disabled")
	keepScreenshot(t, page, "user")
	report(t, labelProblems(t, page))
	report(t, focusProblems(t, page))

	// The owner's right password now gets the wrong password's answer.
	visitor := newPage(t, "owner", desktop)
	submitLogin(t, visitor, base, owner, password)
	wantURL(t, visitor, base+"/login")
	wantText(t, visitor, "main [role=alert]", wrongPasswordText)
	submitLogin(t, visitor, base, owner, "not the password")
	wantText(t, visitor, "main [role=alert]", wrongPasswordText)

	press(t, page, "Enable")
	wantText(t, page, "#user-state dd:nth-of-type(2)", "Enabled")
	signIn(t, visitor, base, owner, password)

	follow(t, page, "Delete…")
	wantText(t, page, "main h1", "Delete "+owner+"?")
	press(t, page, "Delete the account")
	wantURL(t, page, base+"/admin/users?notice=deleted")
	wantText(t, page, "main [role=status]", regexp.MustCompile("The account was deleted"))
	wantText(t, page, "#users tbody td:first-child", []string{admin, "oscar@example.com"})

	// The only administrator's own page refuses to demote them.
	follow(t, page, admin)
	wantText(t, page, "main h1", admin)
	press(t, page, "Demote to member")
	wantText(t, page, "main [role=status]", regexp.MustCompile("would leave no enabled administrator"))
	wantText(t, page, "#user-state dd:nth-of-type(1)", "Administrator")

	// Both pages fit a phone's width.
	small := newPage(t, "admin-phone", phone)
	signIn(t, small, base, admin, password)
	for _, path := range []string{"/admin/users", fmt.Sprintf("/admin/users/%d", oscar.ID)} {
		open(t, small, base+path)
		report(t, overflowProblems(t, small))
	}
}
