package web

import (
	"net/url"
	"path"
	"strings"
)

// Where a browser goes after signing in or out: the rd parameter of /login
// and /logout names the page of a protected application it came from
// (forward-auth sends it there with rd set). Since anyone can write a link
// to /login?rd=..., rd is an open redirect unless it is checked, and a
// sign-in page that forwards to a look-alike site is a phishing kit's best
// friend. So one function, safeRedirect, decides, and it is strict: rd
// must be plainly an absolute URL, https (http too only with insecure
// cookies), of a protected host or of XCloak's own, with nothing a browser
// or a URL parser could read two ways. Anything else is ignored.

// afterSignIn is where a browser goes when rd is absent or refused.
const afterSignIn = "/account"

// redirectRule is what safeRedirect allows.
type redirectRule struct {
	// hosts are the protected hosts (XCLOAK_PROTECTED_HOSTS).
	hosts ProtectedHosts
	// ownHost is XCloak's own host name, without its port.
	ownHost string
	// allowHTTP allows http as well as https: only with insecure cookies,
	// when XCloak itself is served over http.
	allowHTTP bool
}

// safeRedirect returns rd, as a URL to send a browser to, when rule
// allows it: an absolute http(s) URL of at most maxFieldBytes bytes of
// printable ASCII, with no backslash anywhere, with an authority that
// holds no userinfo ("@") and no percent-encoding, whose host is a DNS name
// matching a protected pattern or XCloak's own host (ports are not
// compared), and that net/url reads the same way. On XCloak's own host,
// only a page a link may open (linkablePath), without the notices of its
// forms' redirects (ownRedirectParams).
func safeRedirect(rd string, rule redirectRule) (string, bool) {
	if rd == "" || len(rd) > maxFieldBytes {
		return "", false
	}
	for i := 0; i < len(rd); i++ {
		// No spaces, controls (which browsers strip, so "java\tscript:" is
		// javascript:), non-ASCII or backslashes (which browsers read as
		// slashes in http URLs).
		if c := rd[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return "", false
		}
	}
	scheme, rest, ok := strings.Cut(rd, "://")
	if !ok {
		return "", false
	}
	scheme = strings.ToLower(scheme)
	if scheme != "https" && !(scheme == "http" && rule.allowHTTP) {
		return "", false
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	if authority == "" || strings.ContainsAny(authority, "@%") {
		return "", false
	}
	host := hostOnly(authority)
	if host == "" {
		return "", false
	}
	if _, ok := rule.hosts.Match(host); !ok && host != rule.ownHost {
		return "", false
	}
	// The same reading by net/url, so that the URL sent is the URL checked.
	u, err := url.Parse(rd)
	if err != nil || u.Scheme != scheme || u.Opaque != "" || u.User != nil || strings.ToLower(u.Hostname()) != host {
		return "", false
	}
	if host == rule.ownHost && !linkablePath(u.Path) {
		return "", false
	}
	if host == rule.ownHost && u.RawQuery != "" {
		// The redirect after signing in is XCloak's own, which its pages
		// take for their forms' (ownRedirect): a notice in rd would have
		// them confirm an act nobody did to whoever signs in by a link.
		u.RawQuery = strings.TrimPrefix(withoutNotices("?"+u.RawQuery), "?")
	}
	return u.String(), true
}

// linkablePath reports whether p, as the mux would clean it, is a page
// that a link may open (linkable): not the export, the live stream or the
// API. The redirect after signing in is XCloak's own, which they take for
// its pages' fetch, so an rd naming them would run an export, say, in the
// name of an administrator who signed in by another site's link.
func linkablePath(p string) bool {
	p = path.Clean("/" + p)
	return p != "/admin/events.csv" && p != "/admin/stream" && p != "/api" && !strings.HasPrefix(p, apiPrefix)
}

// target is where a browser goes after signing in: rd when it is allowed,
// else afterSignIn.
func (r redirectRule) target(rd string) string {
	if u, ok := safeRedirect(rd, r); ok {
		return u
	}
	return afterSignIn
}

// redirectRule is the Server's rule for rd.
func (s *Server) redirectRule() redirectRule {
	r := redirectRule{hosts: s.cfg.ProtectedHosts, allowHTTP: s.cfg.InsecureCookies}
	if s.cfg.PublicURL != nil {
		r.ownHost = strings.ToLower(s.cfg.PublicURL.Hostname())
	}
	return r
}
