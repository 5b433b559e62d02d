package web

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"unicode/utf8"
)

// HostPattern is one entry of XCLOAK_PROTECTED_HOSTS: a host the reverse
// proxies may ask about (forward-auth, authz.go) and that a sign-in may
// return to (rd, redirect.go).
type HostPattern struct {
	// Host is the exact host, or for a wildcard the suffix after "*.",
	// in lower case.
	Host string
	// Wildcard matches every subdomain of Host, at any depth, but not
	// Host itself.
	Wildcard bool
	// AdminOnly lets only administrators through.
	AdminOnly bool
}

// String is the pattern as it is written in the setting.
func (p HostPattern) String() string {
	s := p.Host
	if p.Wildcard {
		s = "*." + s
	}
	if p.AdminOnly {
		s += "=admin"
	}
	return s
}

// ProtectedHosts are the hosts XCloak guards for reverse proxies. The zero
// value protects none: every forward-auth question is refused.
type ProtectedHosts []HostPattern

// ParseProtectedHosts reads XCLOAK_PROTECTED_HOSTS: comma-separated
// patterns, each an exact host (app.example.com) or "*." and a domain of
// at least two labels (*.internal.example.com), optionally followed by
// "=admin". Case does not matter; spaces around entries and empty entries
// are ignored. Hosts are DNS names in ASCII (an internationalised name in
// its xn-- form), without a port, scheme, path or trailing dot; "*" alone
// and a wildcard over a single label ("*.com") are refused.
func ParseProtectedHosts(s string) (ProtectedHosts, error) {
	var out ProtectedHosts
	for n, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if strings.Contains(entry, "@") {
			// Unquoted: a host has no '@', and what comes before one
			// in a URL pasted here is a user name and password.
			return nil, fmt.Errorf("protected host %d of the list holds an '@': give the host alone, with no user name or password", n+1)
		}
		p, err := parseHostPattern(entry)
		if err != nil {
			return nil, fmt.Errorf("protected host %q: %w", entry, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func parseHostPattern(entry string) (HostPattern, error) {
	var p HostPattern
	host, role, hasRole := strings.Cut(entry, "=")
	if hasRole {
		if !strings.EqualFold(role, "admin") {
			return p, fmt.Errorf("%q is not a role: the only one is =admin", role)
		}
		p.AdminOnly = true
	}
	host, ascii := lowerASCII(host)
	if !ascii {
		return p, errors.New("not a DNS name: an internationalised name is given in its xn-- form")
	}
	if suffix, ok := strings.CutPrefix(host, "*."); ok {
		p.Wildcard, host = true, suffix
		if !strings.Contains(host, ".") {
			return p, errors.New("a wildcard must cover a domain of at least two labels, such as *.example.com")
		}
	}
	switch {
	case strings.Contains(host, "://"):
		return p, errors.New("give the host alone, without a scheme")
	case strings.ContainsAny(host, "/?#"):
		return p, errors.New("give the host alone, without a path")
	case strings.Contains(host, ":"):
		return p, errors.New("give the host without a port: ports are not compared")
	case strings.Contains(host, "*"):
		return p, errors.New(`"*" may only start a pattern, as in *.example.com`)
	case !validHostname(host):
		return p, errors.New("not a DNS name: letters, digits and hyphens in dot-separated labels (an internationalised name in its xn-- form)")
	case endsInNumber(host):
		return p, errors.New("an address, not a DNS name: browsers read a name whose last label is a number as an IPv4 address")
	}
	p.Host = host
	return p, nil
}

// validHostname reports whether h, in lower case, is a DNS name of ASCII
// letters, digits and hyphens, each label 1 to 63 bytes not starting or
// ending with a hyphen, 253 bytes at most, with no trailing dot.
func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// endsInNumber reports whether browsers read h, a valid host name, as an
// IPv4 address: the URL standard does so when its last label is decimal
// digits or 0x and hexadecimal digits (10.0.0.5, 0x7f.1, 2130706433).
func endsInNumber(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	digits, hex := strings.CutPrefix(last, "0x")
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if !(c >= '0' && c <= '9' || hex && c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Match returns the pattern that host (as in a URL: any case, with or
// without a port) falls under. When several do, one with AdminOnly wins:
// listing a host twice never opens it wider. A host that is not a valid
// DNS name matches nothing.
func (ph ProtectedHosts) Match(host string) (HostPattern, bool) {
	host = hostOnly(host)
	if host == "" {
		return HostPattern{}, false
	}
	var found HostPattern
	ok := false
	for _, p := range ph {
		if p.matches(host) && (!ok || p.AdminOnly) {
			found, ok = p, true
		}
	}
	return found, ok
}

func (p HostPattern) matches(host string) bool {
	if !p.Wildcard {
		return host == p.Host
	}
	return len(host) > len(p.Host)+1 && strings.HasSuffix(host, p.Host) && host[len(host)-len(p.Host)-1] == '.'
}

// hostOnly returns a URL's host without its port, in lower case, or "" if
// it is no valid DNS name. Brackets hold an IPv6 address alone: a name in
// them ("[app.example.com]:443"), which net.SplitHostPort unwraps, is
// malformed, and refused as URL parsers and browsers refuse it. A host with
// a byte past ASCII is refused (lowerASCII): "wİki.example.com", which a
// proxy matches against no server name of its own and serves from another
// block (nginx's default server), would otherwise be judged as
// wiki.example.com.
func hostOnly(host string) string {
	if strings.HasPrefix(host, "[") {
		return ""
	}
	if h, port, err := net.SplitHostPort(host); err == nil {
		if !validPortNumber(port) {
			return ""
		}
		host = h
	}
	host, ok := lowerASCII(host)
	if !ok || !validHostname(host) {
		return ""
	}
	return host
}

// lowerASCII is s with its ASCII letters lowered, or false if s holds a
// byte past ASCII, which no DNS name does (an internationalised one is
// written in its xn-- form). strings.ToLower follows Unicode, where "İ"
// lowers to "i" and the Kelvin sign to "k": a name no one asked for would
// become one of the names listed.
func lowerASCII(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return "", false
		}
	}
	return strings.ToLower(s), true
}

// validPortNumber reports whether p is a decimal port from 0 to 65535.
func validPortNumber(p string) bool {
	return p != "" && !strings.HasPrefix(p, "_") && validPort(p)
}

// ParseCookieDomain reads XCLOAK_COOKIE_DOMAIN: a DNS name of at least two
// labels (example.com, not com), a leading dot allowed and dropped, in
// lower case.
func ParseCookieDomain(s string) (string, error) {
	d, ascii := lowerASCII(strings.TrimPrefix(strings.TrimSpace(s), "."))
	switch {
	case !ascii || !validHostname(d):
		return "", fmt.Errorf("%q is not a DNS name", s)
	case !strings.Contains(d, "."):
		return "", fmt.Errorf("%q is a single label: give the parent domain the protected hosts share, such as example.com", s)
	case endsInNumber(d):
		return "", fmt.Errorf("%q is an address, not a DNS name: browsers read a name whose last label is a number as an IPv4 address", s)
	}
	return d, nil
}

// CheckCookieDomain refuses a cookie domain that browsers would not accept
// from XCloak or that would not reach every protected host: XCloak's own
// host (from publicURL's host) must be the domain or within it, and so
// must every protected pattern, since a host the session cookie never
// reaches could never pass. An empty domain is always accepted.
func CheckCookieDomain(domain, publicHost string, hosts ProtectedHosts) error {
	if domain == "" {
		return nil
	}
	if h := hostOnly(publicHost); h == "" || !withinDomain(h, domain) {
		return fmt.Errorf("XCLOAK_COOKIE_DOMAIN %s does not contain XCloak's own host %s (XCLOAK_PUBLIC_URL): browsers would refuse the cookie",
			domain, publicHost)
	}
	for _, p := range hosts {
		if !withinDomain(p.Host, domain) {
			return fmt.Errorf("XCLOAK_PROTECTED_HOSTS %s is outside XCLOAK_COOKIE_DOMAIN %s: the session cookie would never reach it", p, domain)
		}
	}
	return nil
}

// withinDomain reports whether host is domain or one of its subdomains.
func withinDomain(host, domain string) bool {
	return host == domain || strings.HasSuffix(host, "."+domain)
}
