package web

import (
	"errors"
	"net/http"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/templates"
)

func (s *Server) handleAccount() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, _ string) error {
		user, err := s.auth.UserByEmail(r.Context(), sess.Email)
		if errors.Is(err, auth.ErrNoUser) {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return nil
		}
		if err != nil {
			return err
		}
		// Past its limit the page still shows, without the lists: the
		// landing page after a sign-in is no new route to refuse.
		list, err := s.auth.ListSessions(r.Context(), sess, s.client(r))
		var limited *auth.LimitedError
		if err != nil && !errors.As(err, &limited) {
			return err
		}
		sessions, devices := sessionRows(list)
		s.render(w, r, http.StatusOK, templates.AccountPage(templates.AccountProps{
			Nav:         templates.Nav{SignedIn: true, Email: sess.Email, IsAdmin: sess.IsAdmin},
			Email:       sess.Email,
			IsAdmin:     sess.IsAdmin,
			MemberSince: user.CreatedAt,
			SignedInAt:  sess.CreatedAt,
			Notice:      accountNotice(r),
			Sessions:    sessions,
			Devices:     devices,
			ListsHidden: limited != nil,
		}))
		return nil
	})
}

// errPasswordChangeRequired: the session can only change the password
// (auth.Session.MustChangePassword).
var errPasswordChangeRequired = errors.New("web: password change required")

// passwordPage is where a session changes its password, and where one
// that must change it is sent from every other signed-in page.
const passwordPage = "/account/password"

func (s *Server) handlePasswordPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, ok := s.passwordSession(w, r)
		if !ok {
			return
		}
		s.render(w, r, http.StatusOK, templates.PasswordChangePage(templates.PasswordChangeProps{
			Nav: navFor(sess), Required: sess.MustChangePassword}))
	})
}

// passwordSession returns the session of a request to the password's
// pages, or answers it: without a session, with the sign-in page; when
// the session cannot be read, with the failure, as requireOwner does, so
// that an outage does not send a browser that is still signed in to sign
// in again.
func (s *Server) passwordSession(w http.ResponseWriter, r *http.Request) (auth.Session, bool) {
	sess, err := s.auth.Session(r.Context(), s.readCookie(r, sessionCookie))
	switch {
	case errors.Is(err, auth.ErrNoSession):
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return auth.Session{}, false
	case err != nil:
		s.failAs(w, r, &templates.Nav{}, err)
		return auth.Session{}, false
	}
	return sess, true
}

// changePassword runs a password change for either front end, from the
// request's session and device cookie, and sets the session's new token
// (the old one ends with the change). auth.ErrNoSession without a
// session.
func (s *Server) changePassword(w http.ResponseWriter, r *http.Request, sess auth.Session, current, next string) error {
	rotated, err := s.auth.ChangePassword(r.Context(), auth.PasswordChange{
		Session:      s.readCookie(r, sessionCookie),
		Current:      current,
		New:          next,
		Client:       s.client(r),
		DeviceCookie: s.readCookie(r, s.auth.DeviceCookieName(sess.Email)),
	})
	if err != nil {
		return err
	}
	s.setCookie(w, sessionCookie, rotated.Token, rotated.EndsAt)
	return nil
}

func (s *Server) handlePasswordForm() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, ok := s.passwordSession(w, r)
		if !ok {
			return
		}
		form, err := decodeForm(r, templates.FieldCurrentPassword, templates.FieldNewPassword, templates.FieldConfirm)
		if err == nil && form[templates.FieldNewPassword] != form[templates.FieldConfirm] {
			err = errNoMatch
		}
		if err == nil {
			err = s.changePassword(w, r, sess, form[templates.FieldCurrentPassword], form[templates.FieldNewPassword])
		}
		switch {
		case err == nil:
			http.Redirect(w, r, "/account?password=changed", http.StatusSeeOther)
			return
		case errors.Is(err, auth.ErrNoSession):
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		p := problemOf(r, err)
		s.logProblem(r, p, err)
		setRetryAfter(w, p)
		props := templates.PasswordChangeProps{Nav: navFor(sess), Required: sess.MustChangePassword, RetryAfterSeconds: p.retryAfter}
		if p.retryAfter == 0 {
			props.Error = p.message
			if errors.Is(err, auth.ErrInvalidCredentials) {
				props.Error = "Your current password is incorrect."
			}
		}
		s.render(w, r, p.status, templates.PasswordChangePage(props))
	})
}

type passwordChangeBody struct {
	CurrentPassword string `json:"current_password"`
	NewPassword     string `json:"new_password"`
}

func (s *Server) handlePasswordAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in passwordChangeBody
		sess, err := s.auth.Session(r.Context(), s.readCookie(r, sessionCookie))
		if errors.Is(err, auth.ErrNoSession) {
			err = errSignedOut
		}
		if err == nil {
			err = decodeJSON(r, &in, &in.CurrentPassword, &in.NewPassword)
		}
		if err == nil {
			err = s.changePassword(w, r, sess, in.CurrentPassword, in.NewPassword)
		}
		if err != nil {
			s.failJSON(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// accountNotice is the account page's notice for the step that led to
// it, when r comes from XCloak's own form's redirect: a link from another
// site may open the account page (userFetch), and would otherwise have it
// confirm a step nobody took ("Every other session was ended"), as
// notice keeps it from the administrators' pages. Its parameters are
// among ownRedirectParams.
func accountNotice(r *http.Request) string {
	if !ownRedirect(r) {
		return ""
	}
	q := r.URL.Query()
	switch {
	case q.Get("password") == "changed":
		return templates.PasswordChangedText
	case q.Get("session") == "ended":
		return templates.SessionEndedText
	case q.Get("sessions") == "ended":
		return templates.OthersEndedText
	case q.Get("device") == "forgotten":
		return templates.DeviceForgottenText
	}
	return ""
}
