package web

import (
	"net/http"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/templates"
)

// sessionCookie is the base name of the session cookie.
const sessionCookie = "xcloak_session"

// cookieName adds the __Host- prefix when cookies are Secure: the browser
// then refuses the cookie unless it is Secure, host-only and for path /,
// so a sibling subdomain cannot plant or shadow it. The session cookie
// under a cookie domain (Config.CookieDomain) cannot be host-only, since
// every protected subdomain must receive it: it gets __Secure- instead,
// which still makes the browser refuse it over plain http.
func (s *Server) cookieName(base string) string {
	switch {
	case s.cfg.InsecureCookies:
		return base
	case base == sessionCookie && s.cfg.CookieDomain != "":
		return "__Secure-" + base
	default:
		return "__Host-" + base
	}
}

// cookieDomain is the Domain attribute of a cookie: the cookie domain for
// the session cookie, none (host-only) for the device cookies, which only
// XCloak reads.
func (s *Server) cookieDomain(base string) string {
	if base == sessionCookie {
		return s.cfg.CookieDomain
	}
	return ""
}

func (s *Server) setCookie(w http.ResponseWriter, name, value string, expires time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name:     s.cookieName(name),
		Value:    value,
		Domain:   s.cookieDomain(name),
		Path:     "/",
		Expires:  expires,
		MaxAge:   max(1, int(time.Until(expires).Seconds())),
		HttpOnly: true,
		Secure:   !s.cfg.InsecureCookies,
		SameSite: http.SameSiteLaxMode,
	})
}

func (s *Server) clearCookie(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{
		Name:     s.cookieName(name),
		Value:    "",
		Domain:   s.cookieDomain(name),
		Path:     "/",
		MaxAge:   -1,
		HttpOnly: true,
		Secure:   !s.cfg.InsecureCookies,
		SameSite: http.SameSiteLaxMode,
	})
}

// readCookie returns a cookie's value, "" if absent.
func (s *Server) readCookie(r *http.Request, name string) string {
	c, err := r.Cookie(s.cookieName(name))
	if err != nil {
		return ""
	}
	return c.Value
}

// signIn sets the cookies of a successful sign-in.
func (s *Server) signIn(w http.ResponseWriter, res auth.LoginResult) {
	s.setCookie(w, sessionCookie, res.Session.Token, res.Session.EndsAt)
	s.setCookie(w, res.Device.Name, res.Device.Value, res.Device.Expires)
}

// session returns the request's live session, if any.
func (s *Server) session(r *http.Request) (auth.Session, bool) {
	token := s.readCookie(r, sessionCookie)
	if token == "" {
		return auth.Session{}, false
	}
	sess, err := s.auth.Session(r.Context(), token)
	if err != nil {
		return auth.Session{}, false
	}
	return sess, true
}

// nav is the page header for the request's visitor.
func (s *Server) nav(r *http.Request) templates.Nav {
	sess, ok := s.session(r)
	if !ok {
		return templates.Nav{}
	}
	return templates.Nav{SignedIn: true, Email: sess.Email, IsAdmin: sess.IsAdmin}
}
