package web_test

import (
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/templates"
)

// TestAccountNoticesOnlyAfterOwnActs: the notices the account pages and
// the sign-in page show after a step ("Every other session was ended",
// "Your password was changed") come from the redirect of XCloak's own
// form, as the administrators' do (TestAdminNoticesOnlyAfterOwnActs). A
// link from another site, which may open these pages, carries the same
// query and shows nothing: a phishing mail's "end your other sessions"
// link must not have XCloak confirm that they were ended, whether it is
// followed from a webmail (cross-site) or from a mail program outside
// the browser, which opens it as a typed address is (none).
func TestAccountNoticesOnlyAfterOwnActs(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, memberEmail, anyPassword, false)
	member := xcloaktest.Client(t, "127.0.30.20")
	signIn(t, member, base, memberEmail, anyPassword)
	stranger := xcloaktest.Client(t, "127.0.30.21")
	for _, tc := range []struct {
		c           *http.Client
		path, words string
	}{
		{member, "/account?password=changed", templates.PasswordChangedText},
		{member, "/account?session=ended", templates.SessionEndedText},
		{member, "/account?sessions=ended", templates.OthersEndedText},
		{member, "/account?device=forgotten", templates.DeviceForgottenText},
		{member, "/account/mfa?factor=added", "Your authenticator app is set up."},
		{member, "/account/mfa?factor=passkey", templates.PasskeyAddedText},
		{member, "/account/mfa?factor=removed", "The factor was removed."},
		{stranger, "/login?reset=done", "Your password was changed. Sign in with the new one."},
		{stranger, "/login?unlock=done", "This browser can now sign in to your account with your password."},
	} {
		// As the page writes it: an apostrophe is escaped.
		tc.words = html.EscapeString(tc.words)
		for _, site := range []string{"cross-site", "same-site", "none"} {
			resp, body := get(t, tc.c, base+tc.path, "Sec-Fetch-Site", site, "Sec-Fetch-Mode", "navigate",
				"Sec-Fetch-Dest", "document", "Sec-Fetch-User", "?1")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s from a %s link: %d, want 200", tc.path, site, resp.StatusCode)
			}
			if strings.Contains(body, tc.words) {
				t.Errorf("%s from a %s link shows %q", tc.path, site, tc.words)
			}
		}
		resp, body := get(t, tc.c, base+tc.path, "Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, tc.words) {
			t.Errorf("%s after XCloak's own form: %d, without %q", tc.path, resp.StatusCode, tc.words)
		}
		// A browser that sends no fetch metadata shows it after its
		// redirect too.
		resp, body = get(t, tc.c, base+tc.path)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, tc.words) {
			t.Errorf("%s from a browser without fetch metadata: %d, without %q", tc.path, resp.StatusCode, tc.words)
		}
	}
}
