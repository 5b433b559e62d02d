package web_test

import (
	"net/http"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestForwardAuthAdminWithoutFactor: with XCLOAK_ADMIN_MFA=required, an
// administrator who has not enrolled a factor does not pass as one at
// forward-auth or auth-request: 403 on an =admin host, and no "admins"
// group on the others.
func TestForwardAuthAdminWithoutFactor(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{
		Auth: func(c *auth.Config) { c.MFA.Admins = auth.AdminMFARequired },
		Web: func(c *webConfig) {
			c.TrustedProxies = mustPrefixes(t, proxyAddr)
			c.ProtectedHosts = mustHosts(t, "app.example.test, admin.example.test=admin")
		}})
	base := env.Start(t)
	env.AddUser(t, "root@example.com", "battery staple", true)
	root := sessionToken(t, base, "root@example.com", "battery staple")
	if resp := forwardAuth(t, base, proxyAddr, root, forwarded("https", "admin.example.test", "/")...); resp.StatusCode != http.StatusForbidden {
		t.Errorf("forward-auth, the admins' host: %d; want 403", resp.StatusCode)
	}
	if resp := authRequest(t, base, proxyAddr, root, "https://admin.example.test/"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("auth-request, the admins' host: %d; want 403", resp.StatusCode)
	}
	wantIdentity(t, "root on app", forwardAuth(t, base, proxyAddr, root, forwarded("https", "app.example.test", "/")...), "root@example.com", "")
}
