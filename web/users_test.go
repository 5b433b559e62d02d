package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestDisabledSignInNoOracle: a disabled account's right password gets
// the answer its wrong password got while it was enabled, and the answer
// a wrong password gets while it is disabled: status, headers (Set-Cookie
// included) and body byte for byte, from the page and from the API, with
// new browsers signing in at once and with new browsers held for
// verification. From the API, whose body does not echo the address, an
// unknown account's answer is the same too. The held disabled account is
// mailed no link.
func TestDisabledSignInNoOracle(t *testing.T) {
	for _, mode := range []auth.VerificationMode{auth.VerifyNever, auth.VerifyAlways} {
		t.Run(string(mode), func(t *testing.T) {
			env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.NewDeviceVerification = mode }})
			base := env.Start(t)
			ann := env.AddUser(t, "ann@example.com", "the right password", false)
			for i, api := range []bool{false, true} {
				try := func(n int, email, password string) answer {
					c := xcloaktest.Client(t, fmt.Sprintf("127.0.21.%d", 10*i+n))
					if api {
						return answerOf(post(t, c, base+"/api/v1/login", jsonType, loginJSON(email, password)))
					}
					return answerOf(post(t, c, base+"/login", formType, url.Values{"email": {email}, "password": {password}}.Encode()))
				}
				enabledWrong := try(1, ann.Email, "a wrong password")
				if _, err := env.Service.DisableUser(t.Context(), ann.ID, "cli"); err != nil {
					t.Fatal(err)
				}
				answers := map[string]answer{
					"disabled, right password": try(2, ann.Email, "the right password"),
					"disabled, wrong password": try(3, ann.Email, "another wrong password"),
				}
				if api {
					answers["unknown account"] = try(4, "nobody@example.com", "the right password")
				}
				if _, err := env.Service.EnableUser(t.Context(), ann.ID, "cli"); err != nil {
					t.Fatal(err)
				}
				want := http.StatusUnauthorized
				if mode == auth.VerifyAlways {
					want = http.StatusAccepted
				}
				if enabledWrong.status != want {
					t.Fatalf("api=%v: wrong password answered %d, want %d", api, enabledWrong.status, want)
				}
				for name, a := range answers {
					if a != enabledWrong {
						t.Errorf("api=%v, %s:\n%d\n%s\n%s\nwant, as a wrong password while enabled:\n%d\n%s\n%s",
							api, name, a.status, a.headers, a.body, enabledWrong.status, enabledWrong.headers, enabledWrong.body)
					}
				}
			}
			// The held right password of the disabled account mailed
			// nothing; a right password once enabled again does.
			if mode == auth.VerifyAlways {
				heldToken(t, env, base, "127.0.21.50", ann.Email, "the right password")
				if n := len(env.Mail.Messages()); n != 1 {
					t.Errorf("%d mails, want only the one to the enabled account", n)
				}
			}
		})
	}
}

// TestUsersPagesAdminsOnly: the account pages, their actions and their
// API are for administrators: a visitor is sent to sign in (the API
// answers 401), a member gets 403, and nothing is changed.
func TestUsersPagesAdminsOnly(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	member := env.AddUser(t, memberEmail, anyPassword, false)
	visitor := xcloaktest.Client(t, "127.0.31.1")
	m := xcloaktest.Client(t, "127.0.31.2")
	signIn(t, m, base, memberEmail, anyPassword)
	page := fmt.Sprintf("/admin/users/%d", member.ID)
	for _, path := range []string{"/admin/users", "/api/v1/admin/users", page, page + "/delete"} {
		resp, _ := get(t, visitor, base+path)
		want := http.StatusSeeOther
		if strings.HasPrefix(path, "/api/") {
			want = http.StatusUnauthorized
		}
		if resp.StatusCode != want {
			t.Errorf("visitor GET %s: %d, want %d", path, resp.StatusCode, want)
		}
		if resp, _ := get(t, m, base+path); resp.StatusCode != http.StatusForbidden {
			t.Errorf("member GET %s: %d, want 403", path, resp.StatusCode)
		}
	}
	for _, action := range []string{"disable", "promote", "delete", "lock", "sign-out", "reset-link"} {
		if resp, _ := post(t, m, base+page+"/"+action, formType, "for=1h0m0s"); resp.StatusCode != http.StatusForbidden {
			t.Errorf("member POST %s: %d, want 403", action, resp.StatusCode)
		}
	}
	if u, err := env.Service.UserByID(t.Context(), member.ID); err != nil || u.IsAdmin || u.Disabled() {
		t.Errorf("after the member's tries: %+v %v", u, err)
	}
}

// TestUsersSearch: the list finds the accounts whose email starts with
// what was typed, whatever its case, 50 a page, the next page following
// on without a gap; the API answers the same.
func TestUsersSearch(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	for i := range 60 {
		env.AddUser(t, fmt.Sprintf("user%02d@example.com", i), anyPassword, false)
	}
	env.AddUser(t, "zed@example.com", anyPassword, false)
	admin := xcloaktest.Client(t, "127.0.32.1")
	signIn(t, admin, base, adminEmail, anyPassword)

	resp, body := get(t, admin, base+"/admin/users?q=+ZE")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "zed@example.com") || strings.Contains(body, "user00@") {
		t.Errorf("search ZE: %d, zed listed %v, user00 listed %v", resp.StatusCode, strings.Contains(body, "zed@"), strings.Contains(body, "user00@"))
	}

	type page struct {
		Users []struct {
			Email    string `json:"email"`
			Disabled bool   `json:"disabled"`
		} `json:"users"`
		NextCursor string `json:"next_cursor"`
	}
	var seen []string
	next := ""
	for range 3 {
		resp, body := get(t, admin, base+"/api/v1/admin/users?"+url.Values{"q": {"user"}, "after": {next}}.Encode())
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("API: %d %s", resp.StatusCode, body)
		}
		var p page
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatal(err)
		}
		for _, u := range p.Users {
			seen = append(seen, u.Email)
		}
		if next = p.NextCursor; next == "" {
			break
		}
	}
	if len(seen) != 60 || seen[0] != "user00@example.com" || seen[59] != "user59@example.com" || seen[50] != "user50@example.com" {
		t.Errorf("pages of the API: %d accounts, %q", len(seen), seen)
	}
	// The page's own next link.
	_, body = get(t, admin, base+"/admin/users?q=user")
	if !strings.Contains(body, `href="/admin/users?after=user49%40example.com&amp;q=user"`) {
		t.Errorf("first page has no link to the next from user49")
	}
	for _, bad := range []string{"q=a&q=b", "q=%00", "after=" + strings.Repeat("a", 300)} {
		if resp, _ := get(t, admin, base+"/api/v1/admin/users?"+bad); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, resp.StatusCode)
		}
	}
}

// TestUserActions: from an account's page, an administrator disables it
// (its browser is signed out, its forward-auth refused), enables,
// promotes and demotes it, cannot demote themself as the last
// administrator, and deletes it after a confirmation page; a form from
// another site is refused.
func TestUserActions(t *testing.T) {
	env, base := authzEnv(t)
	root := env.AddUser(t, adminEmail, anyPassword, true)
	member := env.AddUser(t, memberEmail, anyPassword, false)
	admin := xcloaktest.Client(t, "127.0.33.1")
	signIn(t, admin, base, adminEmail, anyPassword)
	m := xcloaktest.Client(t, "127.0.33.2")
	signIn(t, m, base, memberEmail, anyPassword)
	token := sessionToken(t, base, memberEmail, anyPassword)
	page := fmt.Sprintf("%s/admin/users/%d", base, member.ID)
	act := func(path, form, wantNotice string, header ...string) {
		t.Helper()
		resp, body := post(t, admin, path, formType, form, header...)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasSuffix(resp.Header.Get("Location"), "notice="+wantNotice) {
			t.Fatalf("POST %s: %d %s %s, want 303 with notice %s", path, resp.StatusCode, resp.Header.Get("Location"), body, wantNotice)
		}
	}

	if resp, _ := post(t, admin, page+"/disable", formType, "", "Origin", "https://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin disable: %d, want 403", resp.StatusCode)
	}
	act(page+"/disable", "", "disabled")
	if resp, _ := get(t, m, base+"/account"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("disabled member's browser reaches /account: %d", resp.StatusCode)
	}
	if resp := forwardAuth(t, base, proxyAddr, token, forwarded("https", "app.example.test", "/")...); resp.StatusCode == http.StatusOK {
		t.Errorf("disabled member passes forward-auth")
	}
	env.Flush(t)
	_, body := get(t, admin, page)
	if !strings.Contains(body, "Disabled") || !strings.Contains(body, "Account disabled") || !strings.Contains(body, "By administrator "+adminEmail) {
		t.Errorf("account page after disabling does not show it disabled, with its event")
	}
	act(page+"/reset-link", "", "disabled-no-op")
	act(page+"/enable", "", "enabled")
	signIn(t, m, base, memberEmail, anyPassword)
	act(page+"/promote", "", "promoted")
	act(page+"/demote", "", "demoted")
	act(page+"/lock", "for=24h0m0s", "locked")
	act(page+"/unlock", "", "unlocked")
	for _, form := range []string{"for=1000h", "for=1h0m0s&for=24h0m0s", ""} {
		if resp, _ := post(t, admin, page+"/lock", formType, form); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("lock with %q: %d, want 400", form, resp.StatusCode)
		}
	}
	act(page+"/reset-link", "", "reset-sent")
	env.Mail.WaitFor(t, memberEmail)
	act(page+"/sign-out", "", "signed-out")

	self := fmt.Sprintf("%s/admin/users/%d", base, root.ID)
	act(self+"/demote", "", "last-admin")
	if u, _ := env.Service.UserByID(t.Context(), root.ID); !u.IsAdmin {
		t.Error("the last administrator was demoted")
	}

	resp, body := get(t, admin, page+"/delete")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Delete the account") {
		t.Fatalf("delete confirmation: %d", resp.StatusCode)
	}
	if _, err := env.Service.UserByID(t.Context(), member.ID); err != nil {
		t.Fatalf("the confirmation page deleted the account: %v", err)
	}
	act(page+"/delete", "", "deleted")
	if resp, _ := get(t, admin, page); resp.StatusCode != http.StatusNotFound {
		t.Errorf("deleted account's page: %d, want 404", resp.StatusCode)
	}
	if resp, _ := get(t, admin, base+"/admin/users/x1"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("page of a malformed id: %d, want 404", resp.StatusCode)
	}
	env.Flush(t)
	var n int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM security_events WHERE account_key = $1 AND detail->>'by' = $2`,
		memberEmail, "admin:"+adminEmail).Scan(&n); err != nil {
		t.Fatal(err)
	}
	// disable, enable, promote, demote, lock, unlock, reset link, sign
	// out, delete.
	if n != 9 {
		t.Errorf("%d events by the administrator kept after deleting, want 9", n)
	}
}

// TestUsersSearchHostileInput: characters that are patterns to LIKE are
// plain characters of the prefix (a search of "%" or "_" finds only
// emails that start with it), and bad or forged input is a 400 on the
// page and the API, never a 500: NUL, control characters, bytes that
// are not UTF-8, an over-long search, a cursor of garbage. A forged but
// well-formed cursor is only a position: it pages on from there.
func TestUsersSearchHostileInput(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	for _, e := range []string{"%pct@example.com", "_under@example.com", "plain@example.com"} {
		env.AddUser(t, e, anyPassword, false)
	}
	// A backslash, which mail reads only in quotes, is no address an
	// account is made for now, but one made before may hold it.
	if _, err := env.DB.Exec(t.Context(), `INSERT INTO users (email, password_hash) SELECT $1, password_hash FROM users WHERE email = $2`,
		`back\slash@example.com`, "plain@example.com"); err != nil {
		t.Fatal(err)
	}
	admin := xcloaktest.Client(t, "127.0.33.1")
	signIn(t, admin, base, adminEmail, anyPassword)
	emails := func(query string) []string {
		t.Helper()
		resp, body := get(t, admin, base+"/api/v1/admin/users?"+query)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", query, resp.StatusCode, body)
		}
		var p struct {
			Users []struct {
				Email string `json:"email"`
			} `json:"users"`
		}
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range p.Users {
			out = append(out, u.Email)
		}
		return out
	}
	for q, want := range map[string]string{"%": "%pct@example.com", "_": "_under@example.com", `back\`: `back\slash@example.com`} {
		if got := emails(url.Values{"q": {q}}.Encode()); len(got) != 1 || got[0] != want {
			t.Errorf("search %q: %q, want only %s", q, got, want)
		}
	}
	if got := emails(url.Values{"after": {"\U0010ffff"}}.Encode()); len(got) != 0 {
		t.Errorf("after the last possible email: %q", got)
	}
	if got := emails(url.Values{"after": {"p"}}.Encode()); len(got) != 2 || got[0] != "plain@example.com" || got[1] != adminEmail {
		t.Errorf("after a forged cursor p: %q", got)
	}
	for _, bad := range []string{"q=%00", "q=a%0Ab", "q=%ff", "q=" + strings.Repeat("a", 5000),
		"after=%ff%fe", "after=%00", "after=a%09b"} {
		for _, path := range []string{"/api/v1/admin/users?", "/admin/users?"} {
			if resp, _ := get(t, admin, base+path+bad); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s%.40s: %d, want 400", path, bad, resp.StatusCode)
			}
		}
	}
	for _, id := range []string{"abc", "-1", "0", "99999999999999999999", "1e3", "%00"} {
		if resp, _ := get(t, admin, base+"/admin/users/"+id); resp.StatusCode != http.StatusNotFound {
			t.Errorf("page of account %q: %d, want 404", id, resp.StatusCode)
		}
	}
}
