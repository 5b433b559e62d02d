package web

import (
	"errors"
	"net/http"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/templates"
)

// login runs a sign-in for either front end.
func (s *Server) login(w http.ResponseWriter, r *http.Request, email, password string) (auth.LoginResult, error) {
	req := auth.LoginRequest{Email: email, Password: password, Client: s.client(r)}
	// Scripts and bots rarely send cookies; only then is the device
	// cookie's name (an HMAC) worth computing.
	if headerValue(r, "Cookie") != "" {
		req.DeviceCookie = s.readCookie(r, s.auth.DeviceCookieName(email))
		req.OldSession = s.readCookie(r, sessionCookie)
	}
	res, err := s.auth.Login(r.Context(), req)
	if err != nil {
		// With ErrMFARequired, res holds the second step.
		return res, err
	}
	s.signIn(w, res)
	return res, nil
}

// allowedReturn is the rd of a request when safeRedirect allows it, else
// "".
func (s *Server) allowedReturn(rd string) string {
	u, _ := safeRedirect(rd, s.redirects)
	return u
}

// handleLoginPage shows the sign-in form. A browser sent here by
// forward-auth with rd that is signed in already (it signed in on another
// tab, say) goes on at once: to rd when allowed, else to the account page,
// or to change its password first when it must.
func (s *Server) handleLoginPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rd := r.URL.Query().Get(templates.FieldReturn)
		sess, signedIn := s.session(r)
		switch {
		case signedIn && rd != "" && sess.MustChangePassword:
			http.Redirect(w, r, passwordPage, http.StatusSeeOther)
			return
		case signedIn && rd != "":
			http.Redirect(w, r, s.redirects.target(rd), http.StatusSeeOther)
			return
		}
		props := templates.LoginProps{Return: s.allowedReturn(rd)}
		if signedIn {
			props.Nav = navFor(sess)
		}
		// The notices follow XCloak's own form's redirect only, as
		// accountNotice's do: from a link elsewhere they would confirm a
		// step nobody took.
		if r.URL.Query().Get("reset") == "done" && ownRedirect(r) {
			props.Notice = "Your password was changed. Sign in with the new one."
		}
		if r.URL.Query().Get("unlock") == "done" && ownRedirect(r) {
			props.Notice = "This browser can now sign in to your account with your password."
		}
		s.loginPage(w, r, http.StatusOK, props)
	})
}

func (s *Server) handleLoginForm() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		form, err := decodeForm(r, templates.FieldEmail, templates.FieldPassword, templates.FieldReturn)
		var res auth.LoginResult
		if err == nil {
			res, err = s.login(w, r, form[templates.FieldEmail], form[templates.FieldPassword])
		} else {
			// Limited and counted like any malformed sign-in.
			err = s.auth.MalformedLogin(r.Context(), s.client(r))
		}
		if err == nil {
			to := s.redirects.target(form[templates.FieldReturn])
			if res.Session.MustChangePassword {
				to = passwordPage
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		if errors.Is(err, auth.ErrMFARequired) {
			s.startSecondStep(w, res.MFA)
			s.mfaStepPage(w, r, http.StatusOK, templates.MFAStepProps{Token: res.MFA.Token, Return: s.allowedReturn(form[templates.FieldReturn])})
			return
		}
		// A held sign-in's link drops rd: it ends maybe in another
		// browser. Its code's form keeps it.
		if errors.Is(err, auth.ErrVerificationRequired) {
			s.held(w, r, res.MFA, form[templates.FieldReturn])
			return
		}
		p := problemOf(r, err)
		s.logProblem(r, p, err)
		setRetryAfter(w, p)
		// The header stays signed-out here: a rejected attempt must not
		// cost a database query.
		props := templates.LoginProps{Email: form[templates.FieldEmail], RetryAfterSeconds: p.retryAfter,
			Return: s.allowedReturn(form[templates.FieldReturn])}
		if p.retryAfter == 0 {
			props.Error = p.message
		}
		s.loginPage(w, r, p.status, props)
	})
}

type loginBody struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

func (s *Server) handleLoginAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in loginBody
		var res auth.LoginResult
		err := decodeJSON(r, &in, &in.Email, &in.Password)
		if err == nil {
			res, err = s.login(w, r, in.Email, in.Password)
		} else {
			// Limited and counted like any malformed sign-in.
			err = s.auth.MalformedLogin(r.Context(), s.client(r))
		}
		if errors.Is(err, auth.ErrVerificationRequired) {
			s.held(w, r, res.MFA, "")
			return
		}
		if errors.Is(err, auth.ErrMFARequired) {
			// The token goes in the body, the binding in a cookie: a
			// client must send both to POST /api/v1/login/mfa.
			s.startSecondStep(w, res.MFA)
			writeJSON(w, http.StatusOK, map[string]string{"status": "mfa_required", "mfa_token": res.MFA.Token})
			return
		}
		if err != nil {
			s.failJSON(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, signedInBody(res))
	})
}

// afterSignOut is where a browser goes after signing out, rd given or
// not: to rd when allowed, else the account page (which sends a signed-out
// browser on to sign in); without rd, the sign-in page.
func (s *Server) afterSignOut(rd string) string {
	if rd == "" {
		return "/login"
	}
	return s.redirects.target(rd)
}

// handleLogout signs out: rd may come in the query or the form.
func (s *Server) handleLogout() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rd := r.URL.Query().Get(templates.FieldReturn)
		if hasContentType(r, "application/x-www-form-urlencoded") {
			if form, err := decodeForm(r, templates.FieldReturn); err == nil && form[templates.FieldReturn] != "" {
				rd = form[templates.FieldReturn]
			}
		}
		if err := s.auth.Logout(r.Context(), s.readCookie(r, sessionCookie)); err != nil {
			s.fail(w, r, err)
			return
		}
		s.clearCookie(w, sessionCookie)
		http.Redirect(w, r, s.afterSignOut(rd), http.StatusSeeOther)
	})
}

// handleLogoutPage is GET /logout, where a protected application's "sign
// out" link leads: a page whose button signs out (a POST, keeping rd). A
// GET signs no one out, so that no other site can do it with a link or an
// image; a browser that is not signed in goes on at once.
func (s *Server) handleLogoutPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rd := r.URL.Query().Get(templates.FieldReturn)
		sess, err := s.auth.Session(r.Context(), s.readCookie(r, sessionCookie))
		switch {
		case errors.Is(err, auth.ErrNoSession):
			http.Redirect(w, r, s.afterSignOut(rd), http.StatusSeeOther)
			return
		case err != nil:
			// A session that cannot be read may still be live: going on
			// as if it were ended would leave its user believing they
			// signed out.
			s.failAs(w, r, &templates.Nav{}, err)
			return
		}
		s.render(w, r, http.StatusOK, templates.LogoutPage(templates.LogoutProps{Nav: navFor(sess), Return: s.allowedReturn(rd)}))
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
