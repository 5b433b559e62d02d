package web_test

import (
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestFormActionProtectedHosts: the pages' forms may lead to XCloak and to
// the protected hosts, on any port, and nowhere else. Browsers hold the
// redirect that answers a form to form-action, so without the protected
// hosts a sign-in from /login?rd= would stop on XCloak instead of going
// back to the application (e2e/forwardauth_test.go shows it in Chromium).
func TestFormActionProtectedHosts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hosts    string
		insecure bool
		want     string
	}{
		{"none", "", false, "form-action 'self'"},
		{"https", "app.example.test,*.internal.example.test=admin", false,
			"form-action 'self' https://app.example.test:* https://*.internal.example.test:*"},
		{"http too with insecure cookies", "app.example.test", true,
			"form-action 'self' https://app.example.test:* http://app.example.test:*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := xcloaktest.New(t, xcloaktest.Options{Web: func(c *webConfig) {
				c.InsecureCookies = tc.insecure
				c.ProtectedHosts = mustHosts(t, tc.hosts)
			}})
			base := env.Start(t)
			c := xcloaktest.Client(t, "127.0.6.3")
			for _, path := range []string{"/login", "/logout"} {
				resp, _ := get(t, c, base+path)
				csp := resp.Header.Get("Content-Security-Policy")
				var got []string
				for d := range strings.SplitSeq(csp, ";") {
					if d = strings.TrimSpace(d); strings.HasPrefix(d, "form-action") {
						got = append(got, d)
					}
				}
				if len(got) != 1 || got[0] != tc.want {
					t.Errorf("%s: form-action %q in %q, want %q", path, got, csp, tc.want)
				}
			}
		})
	}
}
