package web_test

import (
	"strings"
	"testing"

	"github.com/xcloak/xcloak/web"
)

func TestParseProtectedHosts(t *testing.T) {
	hosts, err := web.ParseProtectedHosts(" App.Example.com, *.internal.example.com=ADMIN,, wiki.example.com=admin ")
	if err != nil {
		t.Fatal(err)
	}
	want := []web.HostPattern{
		{Host: "app.example.com"},
		{Host: "internal.example.com", Wildcard: true, AdminOnly: true},
		{Host: "wiki.example.com", AdminOnly: true},
	}
	if len(hosts) != len(want) {
		t.Fatalf("got %v, want %v", hosts, want)
	}
	for i := range want {
		if hosts[i] != want[i] {
			t.Errorf("pattern %d: got %+v, want %+v", i, hosts[i], want[i])
		}
	}
	if none, err := web.ParseProtectedHosts(""); err != nil || none != nil {
		t.Errorf("empty: %v, %v; want none", none, err)
	}

	for _, bad := range []string{
		"*", "*.", "*.com", "*=admin", "**.example.com", "a.*.example.com", "*example.com",
		"app.example.com=user", "app.example.com=", "=admin",
		"https://app.example.com", "app.example.com/path", "app.example.com:443", "app.example.com.",
		"app example.com", "app.example.com x", "app_1.example.com", "-app.example.com", "app-.example.com",
		"аpp.example.com", "app..example.com", ".example.com", "[::1]", strings.Repeat("a", 64) + ".example.com",
		// Lowered by Unicode's rules, "İ" is "i" and the Kelvin sign "k":
		// a name a proxy would never be asked for.
		"wİki.example.com", "\u212aey.example.com", "*.\u212aey.example.com=admin",
	} {
		if got, err := web.ParseProtectedHosts(bad); err == nil {
			t.Errorf("ParseProtectedHosts(%q) = %v, want an error", bad, got)
		}
	}
}

func TestProtectedHostsMatch(t *testing.T) {
	hosts, err := web.ParseProtectedHosts("app.example.com, *.internal.example.com, admin.example.com=admin, *.example.org=admin, open.example.org")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host      string
		ok, admin bool
	}{
		{"app.example.com", true, false},
		{"APP.EXAMPLE.COM", true, false},
		{"app.example.com:8443", true, false},
		{"a.internal.example.com", true, false},
		{"a.b.c.internal.example.com:80", true, false},
		{"admin.example.com", true, true},
		{"x.example.org", true, true},
		// listed plainly and covered by an admin wildcard: admin wins
		{"open.example.org", true, true},
		{"internal.example.com", false, false},
		{"xinternal.example.com", false, false},
		{"example.com", false, false},
		{"example.org", false, false},
		{"app.example.com.evil.example", false, false},
		{"evil.example", false, false},
		{"app.example.com.", false, false},
		{"app.example.com:", false, false},
		{"app.example.com:x", false, false},
		{"app.example.com:99999", false, false},
		// brackets hold an IPv6 address, never a DNS name
		{"[app.example.com]:443", false, false},
		{"[app.example.com]", false, false},
		{"", false, false},
		{"аpp.example.com", false, false},
		// letters past ASCII that Unicode lowers into ASCII ones: no
		// spelling of a listed name
		{"adm\u0130n.example.com", false, false},
		{"\u212A.internal.example.com", false, false},
		{"app.example.com\u212A", false, false},
	} {
		p, ok := hosts.Match(c.host)
		if ok != c.ok || p.AdminOnly != c.admin {
			t.Errorf("Match(%q) = %+v, %v; want ok=%v admin=%v", c.host, p, ok, c.ok, c.admin)
		}
	}
}

func TestCookieDomain(t *testing.T) {
	for _, bad := range []string{"", "com", ".com", "example.com/", "*.example.com", "https://example.com", "exa mple.com", "exİmple.com", "\u212aey.example"} {
		if d, err := web.ParseCookieDomain(bad); err == nil {
			t.Errorf("ParseCookieDomain(%q) = %q, want an error", bad, d)
		}
	}
	if d, err := web.ParseCookieDomain(".Example.com"); err != nil || d != "example.com" {
		t.Errorf("ParseCookieDomain(.Example.com) = %q, %v", d, err)
	}
	hosts, _ := web.ParseProtectedHosts("app.example.com, *.internal.example.com")
	if err := web.CheckCookieDomain("example.com", "login.example.com", hosts); err != nil {
		t.Errorf("a parent of both: %v", err)
	}
	if err := web.CheckCookieDomain("example.com", "example.com:8443", hosts); err != nil {
		t.Errorf("XCloak on the domain itself: %v", err)
	}
	if err := web.CheckCookieDomain("example.com", "login.example.net", hosts); err == nil {
		t.Error("XCloak outside the domain: accepted")
	}
	other, _ := web.ParseProtectedHosts("app.example.net")
	if err := web.CheckCookieDomain("example.com", "login.example.com", other); err == nil {
		t.Error("a protected host outside the domain: accepted")
	}
	if err := web.CheckCookieDomain("", "anything", other); err != nil {
		t.Errorf("no domain: %v", err)
	}
}

// TestHostSettingsRefuseAddresses: a protected pattern or a cookie domain
// whose last label is a number is an IPv4 address to a browser (the URL
// standard reads 10.0.0.5, 0x7f.1 and 2130706433 as addresses), not the
// DNS name the settings take: refused at start, so that a pattern never
// covers an address (*.0.0.5 would cover 10.0.0.5) and rd never names one.
func TestHostSettingsRefuseAddresses(t *testing.T) {
	for _, bad := range []string{"10.0.0.5", "*.0.0.5", "0x7f.1", "app.0x1F", "2130706433", "app.example.123", "*.example.0X7F=admin"} {
		if got, err := web.ParseProtectedHosts(bad); err == nil {
			t.Errorf("ParseProtectedHosts(%q) = %v, want an error", bad, got)
		}
	}
	for _, bad := range []string{"0.0.5", "example.0x10"} {
		if d, err := web.ParseCookieDomain(bad); err == nil {
			t.Errorf("ParseCookieDomain(%q) = %q, want an error", bad, d)
		}
	}
	for _, good := range []string{"1password.example.com", "app.example.com", "app.0x.example", "app.example.0xg"} {
		if _, err := web.ParseProtectedHosts(good); err != nil {
			t.Errorf("ParseProtectedHosts(%q): %v", good, err)
		}
	}
}

// TestProtectedHostsErrorsHideTheUserinfo: an entry pasted as a URL with a
// user name and password is refused without quoting either.
func TestProtectedHostsErrorsHideTheUserinfo(t *testing.T) {
	for _, list := range []string{
		"Alic3Usr:S3cr3tPw@app.example.com",
		"app.example.com, https://Alic3Usr:S3cr3tPw@wiki.example.com=admin",
	} {
		_, err := web.ParseProtectedHosts(list)
		if err == nil {
			t.Errorf("%s: accepted", list)
			continue
		}
		for _, piece := range []string{"Alic3Usr", "S3cr3t"} {
			if strings.Contains(err.Error(), piece) {
				t.Errorf("%s: the error quotes %q: %v", list, piece, err)
			}
		}
	}
}
