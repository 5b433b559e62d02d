package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/xcloak/xcloak/auth"
)

// Forward-auth: a reverse proxy in front of an application asks XCloak,
// before every request it passes on, whether the browser may in. The
// proxy sends the browser's cookies and names the request it is about in
// headers; XCloak answers 200 with the account in Remote-User,
// Remote-Email and Remote-Groups, which the proxy hands to the
// application, or refuses.
//
// Those headers say which host the browser asked for, and so which rule
// applies, so they are believed only from a trusted proxy
// (Config.TrustedProxies): from anyone else the request's host is unknown
// and the answer is 403, never 200. A host that no protected pattern
// (Config.ProtectedHosts) covers is refused too, whatever the session.

// Errors of forward-auth.
var (
	// errUnknownOrigin: the request the proxy asks about cannot be read,
	// because the peer is no trusted proxy or its headers are missing or
	// malformed.
	errUnknownOrigin = errors.New("web: original request unknown or not from a trusted proxy")
	// errHostNotProtected: the host asked about is not a protected one.
	errHostNotProtected = errors.New("web: host not protected")
)

// authzPrefix starts the paths of forward-auth's endpoints.
const authzPrefix = "/api/v1/authz/"

// The headers of a 200 answer.
const (
	headerRemoteUser   = "Remote-User"
	headerRemoteEmail  = "Remote-Email"
	headerRemoteGroups = "Remote-Groups"
	// groupAdmins is the group of XCloak's administrators.
	groupAdmins = "admins"
)

// originalRequest reads, from a trusted proxy's headers, the URL of the
// request it asks about and that URL's host; ok is false when they are
// missing or malformed.
type originalRequest func(r *http.Request) (original, host string, ok bool)

// handleForwardAuth answers Traefik's forwardAuth and Caddy's
// forward_auth: the request is in X-Forwarded-Proto, -Host and -Uri (and
// -Method, which decides nothing). Without a session the browser is sent
// to sign in, with rd naming the page to come back to.
func (s *Server) handleForwardAuth() http.Handler {
	login := s.signInURL()
	return s.authz(forwardedRequest, func(w http.ResponseWriter, r *http.Request, original string) {
		w.Header().Set("Location", login(original))
		w.WriteHeader(http.StatusFound)
	})
}

// handleAuthRequest answers nginx's auth_request: the request is in
// X-Original-URL. Without a session the answer is 401, which nginx's
// error_page turns into a visit to the sign-in page. The 401 carries that
// page's address, rd encoded, in Location, since nginx has no way of its
// own to encode it: auth_request_set $login $upstream_http_location, then
// error_page 401 =302 $login.
func (s *Server) handleAuthRequest() http.Handler {
	login := s.signInURL()
	return s.authz(originalURLRequest, func(w http.ResponseWriter, r *http.Request, original string) {
		w.Header().Set("Location", login(original))
		s.fail(w, r, errSignedOut)
	})
}

// signInURL returns the function that gives the address of the sign-in
// page that returns to original: XCLOAK_PUBLIC_URL/login?rd=original,
// encoded.
func (s *Server) signInURL() func(original string) string {
	login := "/login?rd="
	if s.cfg.PublicURL != nil {
		login = strings.TrimSuffix(s.cfg.PublicURL.String(), "/") + login
	}
	return func(original string) string { return login + url.QueryEscape(original) }
}

// authz is forward-auth for either kind of proxy: read names the request
// asked about; signedOut answers when there is no session that may pass
// (none, or one that must change its password first).
func (s *Server) authz(read originalRequest, signedOut func(w http.ResponseWriter, r *http.Request, original string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Only at the route's path as written, as if no other existed:
		// a proxy that keeps clients from the checks by the path they
		// send (HAProxy's path_beg compares it undecoded) would pass
		// /api/v1/auth%7A/forward-auth, which the mux decodes into this
		// route, with the client's own X-Forwarded-* headers. Answered
		// as the API answers any path it has no route for.
		if r.URL.RawPath != "" {
			writeNotFoundJSON(w)
			return
		}
		if !s.fromTrustedProxy(r) {
			s.fail(w, r, errUnknownOrigin)
			return
		}
		original, host, ok := read(r)
		if !ok {
			s.fail(w, r, errUnknownOrigin)
			return
		}
		pattern, ok := s.cfg.ProtectedHosts.Match(host)
		if !ok {
			s.fail(w, r, errHostNotProtected)
			return
		}
		sess, err := s.auth.ProxySession(r.Context(), s.readCookie(r, sessionCookie))
		if err == nil && sess.IsAdmin {
			// Under XCLOAK_ADMIN_MFA=required an administrator without a
			// factor is no administrator here, as /admin sends them to
			// enrol: 403 on =admin hosts, no "admins" group elsewhere. Read
			// afresh, not from the session cache, so that a factor removed
			// takes effect at once; only administrators' requests pay it.
			var needs bool
			needs, err = s.auth.AdminNeedsFactor(r.Context(), sess)
			sess.IsAdmin = !needs
		}
		switch {
		case errors.Is(err, auth.ErrNoSession), err == nil && sess.MustChangePassword:
			signedOut(w, r, original)
		case err != nil:
			s.fail(w, r, err)
		case pattern.AdminOnly && !sess.IsAdmin:
			s.fail(w, r, errNotAdmin)
		default:
			h := w.Header()
			h.Set(headerRemoteUser, sess.Email)
			h.Set(headerRemoteEmail, sess.Email)
			groups := ""
			if sess.IsAdmin {
				groups = groupAdmins
			}
			h.Set(headerRemoteGroups, groups)
			w.WriteHeader(http.StatusOK)
		}
	})
}

// fromTrustedProxy reports whether the request's peer is a trusted proxy.
func (s *Server) fromTrustedProxy(r *http.Request) bool {
	peer, ok := parsePeer(r.RemoteAddr)
	return ok && s.clientIP.isTrusted(peer)
}

// singleHeader returns the value of a header sent exactly once.
func singleHeader(r *http.Request, name string) (string, bool) {
	v := r.Header.Values(name)
	if len(v) != 1 {
		return "", false
	}
	return v[0], true
}

// forwardedRequest reads X-Forwarded-Proto, X-Forwarded-Host and
// X-Forwarded-Uri, each sent once: an http or https scheme and a host that
// is a DNS name, with an optional port. A URI that is empty, that is not
// an absolute path of printable ASCII, or that makes the URL longer than
// maxFieldBytes counts as "/", since only the host decides and the URI is
// only where the browser comes back to.
func forwardedRequest(r *http.Request) (original, host string, ok bool) {
	proto, ok1 := singleHeader(r, "X-Forwarded-Proto")
	rawHost, ok2 := singleHeader(r, "X-Forwarded-Host")
	if !ok1 || !ok2 {
		return "", "", false
	}
	proto = strings.ToLower(proto)
	if proto != "https" && proto != "http" {
		return "", "", false
	}
	if host = hostOnly(rawHost); host == "" {
		return "", "", false
	}
	origin := proto + "://" + rawHost
	uri, _ := singleHeader(r, "X-Forwarded-Uri")
	// A URI that makes the whole URL longer than rd may be counts as "/"
	// too, as a long X-Original-URL does: the sign-in page would refuse
	// such an rd and send the browser to /account instead.
	if !printablePath(uri) || len(origin)+len(uri) > maxFieldBytes {
		uri = "/"
	}
	return origin + uri, host, true
}

// printablePath reports whether uri is an absolute path (and query) of
// printable ASCII without backslashes, of at most maxFieldBytes bytes.
func printablePath(uri string) bool {
	if !strings.HasPrefix(uri, "/") || strings.HasPrefix(uri, "//") || len(uri) > maxFieldBytes {
		return false
	}
	return printableASCII(uri)
}

// printableASCII reports whether s is printable ASCII without spaces or
// backslashes, as rd must be (safeRedirect).
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

// originalURLRequest reads X-Original-URL, sent once: an absolute http or
// https URL without userinfo whose host is a DNS name. A URL longer than
// maxFieldBytes counts as its host's root, as a long X-Forwarded-Uri
// does, and so does one that is not printable ASCII without spaces or
// backslashes, as such an X-Forwarded-Uri does: only the host decides, and
// rd could not name it anyway.
func originalURLRequest(r *http.Request) (original, host string, ok bool) {
	raw, ok := singleHeader(r, "X-Original-URL")
	if !ok {
		return "", "", false
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.User != nil || u.Opaque != "" {
		return "", "", false
	}
	if host = hostOnly(u.Host); host == "" {
		return "", "", false
	}
	if len(raw) > maxFieldBytes || !printableASCII(raw) {
		raw = u.Scheme + "://" + u.Host + "/"
	}
	return raw, host, true
}
