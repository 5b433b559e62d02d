package auth

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// The relying party of passkeys: its ID and the origins a ceremony may
// come from (XCLOAK_WEBAUTHN_RP_ID, XCLOAK_WEBAUTHN_ORIGINS). Browsers
// hold a passkey for one RP ID, a domain name, and use it from pages
// whose host is that name or a subdomain of it, over https (or http on
// localhost, a secure context). A passkey registered for one RP ID never
// works for another, so the RP ID is chosen once: the public URL's host
// by default, or a parent domain shared by several hosts.

// ParseWebAuthnRPID checks an RP ID: a domain name, not an IP address,
// without scheme or port; it is returned in lower case.
func ParseWebAuthnRPID(s string) (string, error) {
	// First, and without quoting s: a domain name has no '@', and what
	// comes before one in a URL pasted here is a user name and password.
	if strings.Contains(s, "@") {
		return "", errors.New("it holds an '@': give the domain name alone (such as example.com), with no user name or password")
	}
	id := strings.ToLower(strings.TrimSpace(s))
	if _, err := netip.ParseAddr(strings.Trim(id, "[]")); err == nil {
		return "", fmt.Errorf("%q is an IP address: browsers offer passkeys to domain names only", s)
	}
	if !isDomainName(id) {
		return "", fmt.Errorf("%q is not a domain name (such as example.com: no scheme, port or path)", s)
	}
	return id, nil
}

// isDomainName reports whether s is a domain name in ASCII (punycode for
// international ones): dot-separated labels of letters, digits and
// hyphens, none empty or starting or ending with a hyphen.
func isDomainName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// ParseWebAuthnOrigins parses a comma-separated list of origins, such as
// "https://login.example.com, https://app.example.com:8443": each a scheme
// and host with an optional port, https (http for localhost alone), with
// no user, path, query or fragment, listed once. They are returned as
// browsers write them: in lower case, without a default port.
func ParseWebAuthnOrigins(list string) ([]string, error) {
	var out []string
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, errors.New("an empty origin in the list")
		}
		o, err := parseOrigin(item)
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, o) {
			return nil, fmt.Errorf("%s is listed twice", o)
		}
		out = append(out, o)
	}
	return out, nil
}

// parseOrigin checks one origin and returns it as browsers write it.
func parseOrigin(s string) (string, error) {
	// First, and without quoting s: an origin has no '@', and what comes
	// before one may be a user name and password.
	if strings.Contains(s, "@") {
		return "", errors.New("an origin of the list has a user name: an origin has none")
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("%q is not an origin (https://host or https://host:port)", s)
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname())
	switch {
	case u.Path != "" && u.Path != "/":
		return "", fmt.Errorf("%q has a path: an origin has none", s)
	case u.RawQuery != "" || u.ForceQuery:
		return "", fmt.Errorf("%q has a query: an origin has none", s)
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "", fmt.Errorf("%q has a fragment: an origin has none", s)
	case scheme == "http" && !isLocalhost(host):
		return "", fmt.Errorf("%q is not https: browsers offer passkeys over http to localhost only", s)
	case scheme != "https" && scheme != "http":
		return "", fmt.Errorf("%q is not https", s)
	}
	port := u.Port()
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q has a port out of 1 to 65535", s)
		}
		if scheme == "https" && n == 443 || scheme == "http" && n == 80 {
			port = ""
		} else {
			port = strconv.Itoa(n)
		}
	}
	return (&url.URL{Scheme: scheme, Host: joinHostPort(u, host, port)}).String(), nil
}

// joinHostPort writes host (bracketed again if u's was) and port.
func joinHostPort(u *url.URL, host, port string) string {
	if strings.HasPrefix(u.Host, "[") {
		host = "[" + host + "]"
	}
	if port == "" {
		return host
	}
	return host + ":" + port
}

// isLocalhost reports whether host is localhost or one of its
// subdomains, which browsers count as secure over http.
func isLocalhost(host string) bool {
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// Resolve fills in the defaults from the public URL (XCloak's own pages)
// and checks c: the RP ID a domain name, every origin's host the RP ID or
// a subdomain of it (a public suffix such as co.uk is no RP ID for a
// subdomain), the public URL's origin among them. With neither set and a
// public URL where browsers offer no WebAuthn (an IP address, or http away
// from localhost), it returns the zero WebAuthnConfig and no error:
// passkeys are off. Its errors name the settings.
func (c WebAuthnConfig) Resolve(public *url.URL) (WebAuthnConfig, error) {
	host := strings.ToLower(public.Hostname())
	_, ipErr := netip.ParseAddr(host)
	onAddress := ipErr == nil
	if c.RPID == "" && len(c.Origins) == 0 && (onAddress || public.Scheme != "https" && !isLocalhost(host)) {
		return WebAuthnConfig{}, nil
	}
	if onAddress {
		return WebAuthnConfig{}, fmt.Errorf("XCLOAK_WEBAUTHN_RP_ID, XCLOAK_WEBAUTHN_ORIGINS: XCloak's pages are at an IP address (XCLOAK_PUBLIC_URL %s), "+
			"where browsers offer no passkeys: give XCloak a domain name, or unset these to run without passkeys", public)
	}
	own, err := parseOrigin((&url.URL{Scheme: public.Scheme, Host: public.Host}).String())
	if err != nil {
		return WebAuthnConfig{}, fmt.Errorf("XCLOAK_PUBLIC_URL: passkeys (XCLOAK_WEBAUTHN_RP_ID, XCLOAK_WEBAUTHN_ORIGINS): %w", err)
	}
	out := WebAuthnConfig{RPID: host, Origins: []string{own}}
	if c.RPID != "" {
		if out.RPID, err = ParseWebAuthnRPID(c.RPID); err != nil {
			return WebAuthnConfig{}, fmt.Errorf("XCLOAK_WEBAUTHN_RP_ID: %w", err)
		}
	}
	if len(c.Origins) > 0 {
		if out.Origins, err = ParseWebAuthnOrigins(strings.Join(c.Origins, ",")); err != nil {
			return WebAuthnConfig{}, fmt.Errorf("XCLOAK_WEBAUTHN_ORIGINS: %w", err)
		}
		if !slices.Contains(out.Origins, own) {
			return WebAuthnConfig{}, fmt.Errorf("XCLOAK_WEBAUTHN_ORIGINS must include %s, the origin of XCLOAK_PUBLIC_URL, where XCloak's pages ask for passkeys", own)
		}
	}
	for _, o := range out.Origins {
		u, _ := url.Parse(o)
		h := u.Hostname()
		if h == out.RPID {
			continue
		}
		if !strings.HasSuffix(h, "."+out.RPID) {
			if o == own && len(c.Origins) == 0 {
				return WebAuthnConfig{}, fmt.Errorf("XCLOAK_WEBAUTHN_RP_ID: %s is neither the host of XCLOAK_PUBLIC_URL (%s) nor a domain above it", out.RPID, h)
			}
			return WebAuthnConfig{}, fmt.Errorf("XCLOAK_WEBAUTHN_ORIGINS: %s is neither on XCLOAK_WEBAUTHN_RP_ID %s nor on a subdomain of it", o, out.RPID)
		}
		if suffix, _ := publicsuffix.PublicSuffix(out.RPID); suffix == out.RPID {
			return WebAuthnConfig{}, fmt.Errorf("XCLOAK_WEBAUTHN_RP_ID: %s is a public suffix, shared by unrelated sites: it can be the RP ID of %s alone, not of %s", out.RPID, out.RPID, h)
		}
	}
	return out, nil
}
