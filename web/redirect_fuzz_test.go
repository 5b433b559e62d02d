package web

import (
	"net/url"
	"strings"
	"testing"
)

// browserReading is how a browser reads s as the address of a navigation,
// after the URL standard, as far as where it goes: its scheme and its host,
// in lower case and without a port. Leading and trailing controls and
// spaces are dropped and tabs and line breaks removed; a backslash is a
// slash; any run of slashes may follow the scheme; the host is what
// follows the last "@" of the authority, percent-decoded. A string with no
// scheme is relative, and absolute is false: the browser would resolve it
// against XCloak's own page.
func browserReading(s string) (scheme, host string, absolute bool) {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	s = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(s)
	i := strings.IndexByte(s, ':')
	if i <= 0 || !isSchemeStart(s[0]) {
		return "", "", false
	}
	for j := 1; j < i; j++ {
		if c := s[j]; !isSchemeStart(c) && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.' {
			return "", "", false
		}
	}
	scheme = strings.ToLower(s[:i])
	if scheme != "http" && scheme != "https" {
		return scheme, "", true
	}
	rest := strings.TrimLeft(s[i+1:], "/\\")
	authority := rest
	if j := strings.IndexAny(rest, "/\\?#"); j >= 0 {
		authority = rest[:j]
	}
	if j := strings.LastIndexByte(authority, '@'); j >= 0 {
		authority = authority[j+1:]
	}
	if j := strings.IndexByte(authority, ':'); j >= 0 && !strings.HasPrefix(authority, "[") {
		authority = authority[:j]
	}
	decoded, err := url.PathUnescape(authority)
	if err != nil {
		decoded = authority
	}
	return scheme, strings.ToLower(decoded), true
}

func isSchemeStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// FuzzSafeRedirect: whatever rd is, safeRedirect does not panic, and a URL
// it allows is one a browser reads as an http(s) page of a protected host
// or of XCloak's own (never its export, stream or API, nor with a notice),
// with no userinfo, and that it allows again unchanged when the sign-in
// form posts it back.
func FuzzSafeRedirect(f *testing.F) {
	for _, s := range []string{
		"https://app.example.com/", "https://APP.example.com:8443/x?y=1#z", "https://a.b.internal.example.com/",
		"https://login.example.com/admin?period=1h&notice=attack-off", "https://login.example.com/admin/events.csv",
		"//evil.example", "/\\evil.example", "https:\\\\evil.example", "https://app.example.com@evil.example",
		"https://app.example.com%2eevil.example/", "java\tscript:alert(1)", "https://app.example.com./",
		"http://app.example.com/", "https://login.example.com/account?sessions=ended&x=%27",
	} {
		f.Add(s, false)
	}
	hosts, err := ParseProtectedHosts("app.example.com, *.internal.example.com, admin.example.com=admin")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, rd string, allowHTTP bool) {
		rule := redirectRule{hosts: hosts, ownHost: "login.example.com", allowHTTP: allowHTTP}
		out, ok := safeRedirect(rd, rule)
		if !ok {
			return
		}
		scheme, host, absolute := browserReading(out)
		if !absolute || !(scheme == "https" || scheme == "http" && allowHTTP) {
			t.Fatalf("safeRedirect(%q) = %q, which a browser reads as scheme %q (absolute %v)", rd, out, scheme, absolute)
		}
		if _, listed := hosts.Match(host); !listed && host != rule.ownHost {
			t.Fatalf("safeRedirect(%q) = %q, which a browser reads as a page of %q", rd, out, host)
		}
		u, err := url.Parse(out)
		if err != nil || u.User != nil || strings.ToLower(u.Hostname()) != host {
			t.Fatalf("safeRedirect(%q) = %q, which net/url reads as %v (%v)", rd, out, u, err)
		}
		if host == rule.ownHost {
			if !linkablePath(u.Path) {
				t.Fatalf("safeRedirect(%q) = %q, XCloak's %s", rd, out, u.Path)
			}
			for _, name := range ownRedirectParams {
				if u.Query().Has(name) {
					t.Fatalf("safeRedirect(%q) = %q, with the notice %s", rd, out, name)
				}
			}
		}
		if again, ok := safeRedirect(out, rule); !ok || again != out {
			t.Fatalf("safeRedirect(%q) = %q, posted back: %q, %v", rd, out, again, ok)
		}
	})
}
