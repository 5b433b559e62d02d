package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestNotificationsOverHTTP: a sign-in from a new browser through the
// API mails its owner a notice naming the browser from its User-Agent;
// the lockout that an attacker's guesses cause mails an unlock link that
// lets the owner's browser in past the lock; the attacker's answers are
// those of any lockout.
func TestNotificationsOverHTTP(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	env.AddUser(t, "bob@example.com", "the password", false)

	ua := "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0"
	resp, body := post(t, xcloaktest.Client(t, "127.0.13.1"), base+"/api/v1/login", jsonType,
		loginJSON("ann@example.com", "the password"), "User-Agent", ua)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, body)
	}
	notice := env.Mail.WaitFor(t, "ann@example.com")
	for _, want := range []string{"Firefox on Windows", "network 127.0.13.1", "/password-reset/"} {
		if !strings.Contains(notice.Body, want) {
			t.Errorf("new-device notice lacks %q:\n%s", want, notice.Body)
		}
	}

	lockAccount(t, env, base, "127.0.13.66", "bob@example.com")
	m := unlockLink.FindStringSubmatch(env.Mail.WaitFor(t, "bob@example.com").Body)
	if m == nil {
		t.Fatal("no unlock link in the lockout notice")
	}
	owner := xcloaktest.Client(t, "127.0.13.2")
	if resp, _ := post(t, owner, base+"/unlock/"+m[1], formType, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("confirming the notice's unlock link: %d", resp.StatusCode)
	}
	signIn(t, owner, base, "bob@example.com", "the password")
}
