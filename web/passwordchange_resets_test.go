package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestPasswordChangeSpendsResetLinks: a reset link mailed before the
// owner changes the password (say the one in a held sign-in's mail, "your
// password is known to someone") no longer sets a password after the
// change.
func TestPasswordChangeSpendsResetLinks(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "old password", false)
	mine := xcloaktest.Client(t, "127.0.13.20")
	signIn(t, mine, base, "ann@example.com", "old password")
	if resp, _ := post(t, xcloaktest.Client(t, "127.0.13.21"), base+"/api/v1/password-reset", jsonType, `{"email":"ann@example.com"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatal("reset request")
	}
	// The reset link asked for, not the new-device notice's, which a
	// change leaves (TestPasswordChangeKeepsTheNoticesLinks).
	m := resetLink.FindStringSubmatch(mailWith(t, env, "ann@example.com", "Reset your").Body)
	if m == nil {
		t.Fatal("no reset link")
	}
	if resp, body := post(t, mine, base+"/api/v1/account/password", jsonType, changeJSON("old password", "new password!")); resp.StatusCode != http.StatusOK {
		t.Fatalf("change: %d %s", resp.StatusCode, body)
	}
	if status, body := resetWithLink(t, base, "127.0.13.22", m[1], "attacker's choice"); setsPassword(status) {
		t.Errorf("a reset link from before the change still set a password: %d %s", status, body)
	}
}

// TestPasswordChangeKeepsTheNoticesLinks: the reset link of the notice
// that the password was changed is how the owner undoes a change they did
// not make. Whoever made it, changing the password again, does not spend
// it: the owner's reset still sets a password, and ends their session.
func TestPasswordChangeKeepsTheNoticesLinks(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "old password", false)
	thief := xcloaktest.Client(t, "127.0.13.30")
	signIn(t, thief, base, "ann@example.com", "old password")
	if resp, body := post(t, thief, base+"/api/v1/account/password", jsonType, changeJSON("old password", "thief's password 1")); resp.StatusCode != http.StatusOK {
		t.Fatalf("the thief's change: %d %s", resp.StatusCode, body)
	}
	link := resetLink.FindStringSubmatch(mailWith(t, env, "ann@example.com", "was changed").Body)
	if link == nil {
		t.Fatal("no reset link in the notice of the change")
	}
	if resp, body := post(t, thief, base+"/api/v1/account/password", jsonType, changeJSON("thief's password 1", "thief's password 2")); resp.StatusCode != http.StatusOK {
		t.Fatalf("the thief's second change: %d %s", resp.StatusCode, body)
	}
	if status, body := resetWithLink(t, base, "127.0.13.31", link[1], "the owner's again"); !setsPassword(status) {
		t.Fatalf("the owner's reset from the notice after the thief's second change: %d %s", status, body)
	}
	if resp, _ := get(t, thief, base+"/api/v1/account/sessions"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the thief's session after the owner's reset: %d, want 401", resp.StatusCode)
	}
}

// TestOwnersChangeSpendsTheNewDeviceNoticesLink: the reset link of a
// new-device notice is spent by the owner's own change, as any other link
// but a change notice's is: whoever signed in with the password and read
// the owner's mail for a while keeps no way back in.
func TestOwnersChangeSpendsTheNewDeviceNoticesLink(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "old password", false)
	owner := xcloaktest.Client(t, "127.0.13.40")
	signIn(t, owner, base, "ann@example.com", "old password")
	thief := xcloaktest.Client(t, "127.0.13.41")
	signIn(t, thief, base, "ann@example.com", "old password")
	var link []string
	for deadline := time.Now().Add(10 * time.Second); len(link) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		// The second new-device notice is the thief's.
		n := 0
		for _, m := range env.Mail.Messages() {
			if strings.Contains(m.Subject, "New sign-in") {
				if n++; n == 2 {
					link = resetLink.FindStringSubmatch(m.Body)
				}
			}
		}
	}
	if link == nil {
		t.Fatal("no link in the thief's new-device notice")
	}
	if resp, body := post(t, owner, base+"/api/v1/account/password", jsonType, changeJSON("old password", "owner's new password")); resp.StatusCode != http.StatusOK {
		t.Fatalf("the owner's change: %d %s", resp.StatusCode, body)
	}
	if status, body := resetWithLink(t, base, "127.0.13.42", link[1], "the thief's again"); setsPassword(status) {
		t.Fatalf("a new-device notice's link from before the owner's change still set a password: %d %s", status, body)
	}
}

// resetWithLink sets password through the reset link of token, from a
// browser at ip of its own, and returns the answer's status and body.
func resetWithLink(t *testing.T, base, ip, token, password string) (int, string) {
	t.Helper()
	resp, body := post(t, xcloaktest.Client(t, ip), base+"/api/v1/password-reset/confirm", jsonType,
		fmt.Sprintf(`{"token":%q,"password":%q}`, token, password))
	return resp.StatusCode, body
}

// setsPassword reports whether a reset's answer status says the password
// was set.
func setsPassword(status int) bool { return status == http.StatusOK || status == http.StatusNoContent }
