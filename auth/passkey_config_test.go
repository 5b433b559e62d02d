package auth_test

import (
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
)

// TestWebAuthnResolve: the relying party defaults to the public URL's host
// and origin; an RP ID and origins that are set must be a domain name
// every origin's host is within, origins full https ones (http for
// localhost only), each once, among them the public URL's; every refusal
// names its setting.
func TestWebAuthnResolve(t *testing.T) {
	origins := func(list string) []string {
		o, err := auth.ParseWebAuthnOrigins(list)
		if err != nil {
			t.Fatalf("ParseWebAuthnOrigins(%q): %v", list, err)
		}
		return o
	}
	ok := []struct {
		name, public, rpID, origins string
		wantRPID                    string
		wantOrigins                 []string
	}{
		{"defaults", "https://login.example.com/", "", "", "login.example.com", []string{"https://login.example.com"}},
		{"default with a port and a path", "https://login.example.com:8443/xcloak/", "", "", "login.example.com", []string{"https://login.example.com:8443"}},
		{"localhost over http", "http://localhost:8080/", "", "", "localhost", []string{"http://localhost:8080"}},
		{"a parent domain", "https://login.example.com/", "example.com", "", "example.com", []string{"https://login.example.com"}},
		{"origins of subdomains", "https://login.example.com/", "Example.COM",
			"https://login.example.com, https://app.example.com:8443, https://example.com",
			"example.com", []string{"https://login.example.com", "https://app.example.com:8443", "https://example.com"}},
		{"origins written loosely", "https://login.example.com/", "", "HTTPS://Login.Example.com:443/",
			"login.example.com", []string{"https://login.example.com"}},
		{"an IP address without an RP ID: passkeys off", "http://127.0.0.1:8080/", "", "", "", nil},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			public, _ := url.Parse(tc.public)
			cfg := auth.WebAuthnConfig{RPID: tc.rpID}
			if tc.origins != "" {
				cfg.Origins = origins(tc.origins)
			}
			got, err := cfg.Resolve(public)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if got.RPID != tc.wantRPID || !reflect.DeepEqual(got.Origins, tc.wantOrigins) {
				t.Errorf("Resolve = %q %q, want %q %q", got.RPID, got.Origins, tc.wantRPID, tc.wantOrigins)
			}
		})
	}

	badOrigins := []struct{ name, list, want string }{
		{"http", "http://login.example.com", "https"},
		{"http on another host named localhost", "http://localhost.example.com", "https"},
		{"a path", "https://login.example.com/login", "path"},
		{"a query", "https://login.example.com?x=1", "query"},
		{"a fragment", "https://login.example.com#x", "fragment"},
		{"user info", "https://admin@login.example.com", "user"},
		{"no scheme", "login.example.com", "origin"},
		{"another scheme", "ftp://login.example.com", "https"},
		{"an empty item", "https://login.example.com,,https://app.example.com", "empty"},
		{"twice", "https://login.example.com, https://LOGIN.example.com:443", "twice"},
		{"a bad port", "https://login.example.com:99999", "port"},
	}
	for _, tc := range badOrigins {
		t.Run("origins: "+tc.name, func(t *testing.T) {
			_, err := auth.ParseWebAuthnOrigins(tc.list)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseWebAuthnOrigins(%q) = %v, want an error about %q", tc.list, err, tc.want)
			}
		})
	}

	badRPIDs := []struct{ name, rpID, want string }{
		{"an IPv4 address", "192.0.2.1", "IP address"},
		{"an IPv6 address", "::1", "IP address"},
		{"a port", "example.com:443", "domain name"},
		{"a URL", "https://example.com", "domain name"},
		{"a space", "exa mple.com", "domain name"},
		{"an empty label", "example..com", "domain name"},
	}
	for _, tc := range badRPIDs {
		t.Run("RP ID: "+tc.name, func(t *testing.T) {
			_, err := auth.ParseWebAuthnRPID(tc.rpID)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseWebAuthnRPID(%q) = %v, want an error about %q", tc.rpID, err, tc.want)
			}
		})
	}

	badPairs := []struct{ name, public, rpID, origins, want string }{
		{"an origin outside the RP ID", "https://login.example.com/", "example.com", "https://login.example.com, https://login.other.com", "XCLOAK_WEBAUTHN_ORIGINS"},
		{"an RP ID below the public host", "https://example.com/", "login.example.com", "", "XCLOAK_WEBAUTHN_RP_ID"},
		{"a look-alike suffix", "https://login.example.com/", "ample.com", "", "XCLOAK_WEBAUTHN_RP_ID"},
		{"an RP ID at a public URL with an IP address", "http://127.0.0.1:8080/", "example.com", "", "XCLOAK_WEBAUTHN_RP_ID"},
		{"origins without the public URL's", "https://login.example.com/", "example.com", "https://app.example.com", "XCLOAK_WEBAUTHN_ORIGINS"},
		{"a public suffix", "https://login.example.co.uk/", "co.uk", "", "public suffix"},
		{"a top-level domain", "https://example.com/", "com", "", "public suffix"},
		{"an RP ID that is an address", "https://login.example.com/", "192.0.2.1", "", "XCLOAK_WEBAUTHN_RP_ID"},
		{"an origin over http", "https://login.example.com/", "", "http://login.example.com", "XCLOAK_WEBAUTHN_ORIGINS"},
	}
	for _, tc := range badPairs {
		t.Run("pair: "+tc.name, func(t *testing.T) {
			public, _ := url.Parse(tc.public)
			cfg := auth.WebAuthnConfig{RPID: tc.rpID}
			if tc.origins != "" {
				cfg.Origins = strings.Split(tc.origins, ", ")
			}
			_, err := cfg.Resolve(public)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Resolve = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestPasskeySettingsErrorsHideTheUserinfo: an origin or an RP ID
// pasted as a URL with a user name and password is refused without
// quoting either.
func TestPasskeySettingsErrorsHideTheUserinfo(t *testing.T) {
	parseOrigins := func(s string) error { _, err := auth.ParseWebAuthnOrigins(s); return err }
	parseRPID := func(s string) error { _, err := auth.ParseWebAuthnRPID(s); return err }
	for _, c := range []struct {
		parse func(string) error
		value string
	}{
		{parseOrigins, "https://Alic3Usr:S3cr3tPw@login.example.com"},
		{parseOrigins, "https://login.example.com, ftp://Alic3Usr:S3cr3tPw@login.example.com"},
		{parseOrigins, "https://Alic3Usr:S3cr3t%zzPw@login.example.com"},
		{parseOrigins, "https://Alic3Usr:S3cr3tPw@login.example.com/path"},
		{parseOrigins, "http://Alic3Usr:S3cr3tPw@app.example.com"},
		{parseOrigins, "https:Alic3Usr:S3cr3tPw@login.example.com"},
		{parseRPID, "Alic3Usr:S3cr3tPw@example.com"},
		{parseRPID, "https://Alic3Usr:S3cr3tPw@example.com"},
	} {
		err := c.parse(c.value)
		if err == nil {
			t.Errorf("%s: accepted", c.value)
			continue
		}
		for _, piece := range []string{"Alic3Usr", "S3cr3t"} {
			if strings.Contains(err.Error(), piece) {
				t.Errorf("%s: the error quotes %q: %v", c.value, piece, err)
			}
		}
	}
}
