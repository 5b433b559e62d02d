package web

import (
	"errors"
	"net/http"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/templates"
)

// login runs a sign-in for either front end.
func (s *Server) login(w http.ResponseWriter, r *http.Request, email, password string) error {
	req := auth.LoginRequest{Email: email, Password: password, Client: s.client(r)}
	// Scripts and bots rarely send cookies; only then is the device
	// cookie's name (an HMAC) worth computing.
	if r.Header.Get("Cookie") != "" {
		req.DeviceCookie = s.readCookie(r, s.auth.DeviceCookieName(email))
		req.OldSession = s.readCookie(r, sessionCookie)
	}
	res, err := s.auth.Login(r.Context(), req)
	if err != nil {
		return err
	}
	s.signIn(w, res)
	return nil
}

func (s *Server) handleLoginPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		props := templates.LoginProps{Nav: s.nav(r)}
		if r.URL.Query().Get("reset") == "done" {
			props.Notice = "Your password was changed. Sign in with the new one."
		}
		if r.URL.Query().Get("unlock") == "done" {
			props.Notice = "This browser can now sign in to your account with your password."
		}
		s.render(w, r, http.StatusOK, templates.LoginPage(props))
	})
}

func (s *Server) handleLoginForm() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		form, err := decodeForm(r, templates.FieldEmail, templates.FieldPassword)
		if err == nil {
			err = s.login(w, r, form[templates.FieldEmail], form[templates.FieldPassword])
		} else {
			// Limited and counted like any malformed sign-in.
			err = s.auth.MalformedLogin(r.Context(), s.client(r))
		}
		if err == nil {
			http.Redirect(w, r, "/account", http.StatusSeeOther)
			return
		}
		if errors.Is(err, auth.ErrVerificationRequired) {
			s.held(w, r)
			return
		}
		p := problemFor(err)
		s.logProblem(r, p, err)
		setRetryAfter(w, p)
		// The header stays signed-out here: a rejected attempt must not
		// cost a database query.
		props := templates.LoginProps{Email: form[templates.FieldEmail], RetryAfterSeconds: p.retryAfter}
		if p.retryAfter == 0 {
			props.Error = p.message
		}
		s.render(w, r, p.status, templates.LoginPage(props))
	})
}

type loginBody struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

func (s *Server) handleLoginAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in loginBody
		err := decodeJSON(r, &in, &in.Email, &in.Password)
		if err == nil {
			err = s.login(w, r, in.Email, in.Password)
		} else {
			// Limited and counted like any malformed sign-in.
			err = s.auth.MalformedLogin(r.Context(), s.client(r))
		}
		if errors.Is(err, auth.ErrVerificationRequired) {
			s.held(w, r)
			return
		}
		if err != nil {
			s.failJSON(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

func (s *Server) handleLogout() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.auth.Logout(r.Context(), s.readCookie(r, sessionCookie)); err != nil {
			s.fail(w, r, err)
			return
		}
		s.clearCookie(w, sessionCookie)
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	})
}

func (s *Server) handleHome() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.session(r); ok {
			http.Redirect(w, r, "/account", http.StatusSeeOther)
			return
		}
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	})
}
