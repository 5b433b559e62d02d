package web_test

import (
	"fmt"
	"net/http"
	"testing"

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
	m := resetLink.FindStringSubmatch(env.Mail.WaitFor(t, "ann@example.com").Body)
	if m == nil {
		t.Fatal("no reset link")
	}
	if resp, body := post(t, mine, base+"/api/v1/account/password", jsonType, changeJSON("old password", "new password!")); resp.StatusCode != http.StatusOK {
		t.Fatalf("change: %d %s", resp.StatusCode, body)
	}
	resp, body := post(t, xcloaktest.Client(t, "127.0.13.22"), base+"/api/v1/password-reset/confirm", jsonType, fmt.Sprintf(`{"token":%q,"password":"attacker's choice"}`, m[1]))
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNoContent {
		t.Errorf("a reset link from before the change still set a password: %d %s", resp.StatusCode, body)
	}
}
