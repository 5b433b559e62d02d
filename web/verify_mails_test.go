package web_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestHeldSignInMailsCapped: whoever holds an account's leaked password
// can have its sign-ins held as often as the account's sign-in limit
// allows, each with the same 202; the owner gets the first few links
// only (verify_mail_account), and the rest are dropped and counted, so
// the password cannot be used to flood the owner's mailbox.
func TestHeldSignInMailsCapped(t *testing.T) {
	env, base := verifyEnv(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	limit := auth.DefaultLimits().Of(auth.RuleVerifyMailAccount).Count
	tries := limit + 7
	for i := range tries {
		c := xcloaktest.Client(t, fmt.Sprintf("127.0.77.%d", i+1))
		if resp, body := post(t, c, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "the password")); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("try %d: %d %s", i, resp.StatusCode, body)
		}
	}
	// Wait for every job: the mails sent and the drops recorded, each of
	// which may land after the other.
	ownerMails := func() int {
		n := 0
		for _, m := range env.Mail.Messages() {
			if len(m.To) == 1 && m.To[0] == "ann@example.com" {
				n++
			}
		}
		return n
	}
	var mails, dropped int
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		env.Flush(t)
		if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM security_events
			WHERE kind = $1 AND account_key = $2 AND detail->>'reason' = $3`,
			auth.EventResetMailDropped, "ann@example.com", auth.DropAccountLimit).Scan(&dropped); err != nil {
			t.Fatal(err)
		}
		if mails = ownerMails(); mails+dropped >= tries {
			break
		}
	}
	if mails != int(limit) || dropped != tries-int(limit) {
		t.Errorf("%d tries mailed the owner %d times and dropped %d; want %d mailed (the limit) and %d dropped",
			tries, mails, dropped, limit, tries-int(limit))
	}
}
