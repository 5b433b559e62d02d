package web

import (
	"strings"
	"testing"
)

// TestSafeRedirect is the table of open-redirect attempts: every rd that
// does not name, beyond doubt, an https page of a protected host or of
// XCloak itself is refused, and the browser goes to /account.
func TestSafeRedirect(t *testing.T) {
	hosts, err := ParseProtectedHosts("app.example.com, *.internal.example.com, admin.example.com=admin")
	if err != nil {
		t.Fatal(err)
	}
	secure := redirectRule{hosts: hosts, ownHost: "login.example.com"}
	insecure := redirectRule{hosts: hosts, ownHost: "login.example.com", allowHTTP: true}

	allowed := []struct {
		rd   string
		rule redirectRule
		want string
	}{
		{"https://app.example.com/", secure, "https://app.example.com/"},
		{"https://app.example.com", secure, "https://app.example.com"},
		{"https://app.example.com/docs?page=2&q=a%20b#top", secure, "https://app.example.com/docs?page=2&q=a%20b#top"},
		{"https://app.example.com:8443/x", secure, "https://app.example.com:8443/x"},
		{"https://APP.Example.COM/x", secure, "https://APP.Example.COM/x"},
		{"HTTPS://app.example.com/x", secure, "https://app.example.com/x"},
		{"https://wiki.internal.example.com/page", secure, "https://wiki.internal.example.com/page"},
		{"https://a.b.internal.example.com/", secure, "https://a.b.internal.example.com/"},
		{"https://admin.example.com/", secure, "https://admin.example.com/"},
		{"https://login.example.com/account", secure, "https://login.example.com/account"},
		{"http://app.example.com/", insecure, "http://app.example.com/"},
		{"https://app.example.com/a/../b", secure, "https://app.example.com/a/../b"},
	}
	for _, c := range allowed {
		got, ok := safeRedirect(c.rd, c.rule)
		if !ok || got != c.want {
			t.Errorf("safeRedirect(%q) = %q, %v; want %q, true", c.rd, got, ok, c.want)
		}
	}

	refused := []string{
		"",
		"/account",
		"/",
		"app.example.com",
		"app.example.com/x",
		// other hosts and lookalikes
		"https://evil.example/",
		"https://evil.example",
		"https://app.example.com.evil.example/",
		"https://app.example.comevil.example/",
		"https://evilapp.example.com/",
		"https://xapp.example.com/",
		"https://example.com/",
		"https://internal.example.com/",    // the wildcard's bare suffix
		"https://.internal.example.com/",   // empty label
		"https://x..internal.example.com/", // empty label
		"https://wiki.internal.example.com.evil.example/",
		"https://app.example.com./",                 // trailing dot
		"https://аpp.example.com/",                  // Cyrillic а
		"https://app.exаmple.com/",                  // Cyrillic а
		"https://xn--pp-8cd.example.com/",           // punycode of a lookalike, not listed
		"https://app.example.com%2eevil.example/",   // encoded dot in the host
		"https://app%2Eexample.com/",                // encoded dot in a listed host
		"https://%61pp.example.com/",                // encoded letter
		"https://app.example.com:99999/",            // port out of range
		"https://app.example.com:/",                 // empty port
		"https://app.example.com:443:443/",          // two ports
		"https://[::1]/",                            // address literal
		"https://127.0.0.1/",                        // address
		"https://app.example.com:8443@evil.example", // port-looking userinfo
		// scheme-relative and path tricks
		"//evil.example",
		"//evil.example/",
		"///evil.example",
		"////evil.example",
		"/\\evil.example",
		"\\\\evil.example",
		"//app.example.com/",
		"https:/evil.example",
		"https:evil.example",
		"https:/app.example.com/",
		"https:app.example.com/",
		"https:///app.example.com/",
		// other schemes
		"javascript:alert(1)",
		"JavaScript:alert(1)",
		"javascript://app.example.com/%0Aalert(1)",
		"data:text/html,<script>alert(1)</script>",
		"vbscript:msgbox(1)",
		"ftp://app.example.com/",
		"wss://app.example.com/",
		"http://app.example.com/", // http while cookies are Secure
		"HTTP://app.example.com/",
		// backslashes
		"https:\\\\evil.example",
		"https:\\\\app.example.com",
		"https://evil.example\\.app.example.com/",
		"https://app.example.com\\@evil.example/",
		"https://app.example.com/\\evil.example",
		// userinfo
		"https://app.example.com@evil.example/",
		"https://user@app.example.com/",
		"https://user:pass@app.example.com/",
		"https://evil.example@app.example.com/",
		"https://@app.example.com/",
		"https://app.example.com%40evil.example/",
		// fragments and queries hiding the host
		"https://evil.example#@app.example.com",
		"https://evil.example?@app.example.com",
		"https://evil.example/#https://app.example.com",
		// percent-encoded, whole or in part, and double-encoded
		"%2F%2Fevil.example",
		"%2f%2fevil.example",
		"https%3A%2F%2Fevil.example",
		"https%3A%2F%2Fapp.example.com%2F",
		"https%253A%252F%252Fevil.example",
		"%252F%252Fevil.example",
		"https:%2F%2Fevil.example",
		"https:/%2Fevil.example",
		"https%3A//app.example.com/",
		// control characters and spaces anywhere
		"https://app.example.com/\t",
		"https://app.exam\tple.com/",
		"\thttps://app.example.com/",
		"https://app.example.com/\n",
		"https://app.example.com/\r\nSet-Cookie: a=b",
		" https://app.example.com/",
		"https://app.example.com /",
		"https://app.example.com/a b",
		"https://app.example.com/\x00",
		"https://app.example.com/\x7f",
		"java\tscript:alert(1)",
		"\x00https://app.example.com/",
		"https://app.example.com/\u2028",
		"https://app.example.com/é",
		"https://app.example.com/" + strings.Repeat("a", 4096),
	}
	for _, rd := range refused {
		if got, ok := safeRedirect(rd, secure); ok {
			t.Errorf("safeRedirect(%q) = %q, true; want refused", rd, got)
		}
	}
	// Without a protected host, only XCloak's own host is a place to go.
	alone := redirectRule{ownHost: "login.example.com"}
	if got, ok := safeRedirect("https://app.example.com/", alone); ok {
		t.Errorf("with no protected hosts: %q allowed", got)
	}
}

// TestLoginTarget: what a refused rd turns into.
func TestLoginTarget(t *testing.T) {
	hosts, _ := ParseProtectedHosts("app.example.com")
	rule := redirectRule{hosts: hosts, ownHost: "login.example.com"}
	for rd, want := range map[string]string{
		"":                         "/account",
		"https://evil.example/":    "/account",
		"//evil.example":           "/account",
		"https://app.example.com/": "https://app.example.com/",
	} {
		if got := rule.target(rd); got != want {
			t.Errorf("target(%q) = %q, want %q", rd, got, want)
		}
	}
}

// TestSafeRedirectKeepsTheRestOfTheQuery: rd naming one of XCloak's pages
// loses its notices and keeps the rest of its query as written, so that
// the sign-in form, which posts the allowed rd back, has it allowed again
// and unchanged. Re-encoded, a search for quotes would grow threefold past
// the length rd may have, and the browser would land on /account instead.
func TestSafeRedirectKeepsTheRestOfTheQuery(t *testing.T) {
	rule := redirectRule{ownHost: "login.example.com"}
	const own = "https://login.example.com"
	quotes := strings.Repeat("'", 700)
	for rd, want := range map[string]string{
		own + "/admin/users?notice=deleted&q=" + quotes: own + "/admin/users?q=" + quotes,
		own + "/admin/events?z=1&notice=x&a=b+c":        own + "/admin/events?z=1&a=b+c",
		own + "/admin/users?%6Eotice=deleted&q=ann":     own + "/admin/users?q=ann",
		own + "/admin?notice=attack-off":                own + "/admin",
	} {
		got, ok := safeRedirect(rd, rule)
		if !ok || got != want {
			t.Errorf("safeRedirect(%.80q) = %.80q, %v; want %.80q", rd, got, ok, want)
			continue
		}
		if again, ok := safeRedirect(got, rule); !ok || again != got {
			t.Errorf("safeRedirect(%.80q), posted back: %.80q, %v; want it unchanged", got, again, ok)
		}
	}
}
