package web

import (
	"errors"
	"net/http"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/templates"
)

// noReferrer keeps a reset token, which sits in the page's URL, out of the
// Referer header of anything the page links to.
func noReferrer(w http.ResponseWriter) {
	w.Header().Set("Referrer-Policy", "no-referrer")
}

// refuseOtherSites answers 403 cross_site, and reports true, when another
// site's page, or a sibling host's, made the browser fetch a link's page
// (an image, a frame, a navigation its script made) rather than open it
// by a link (userFetch). Opening the page counts against the
// confirmations' limit of the network (reset_confirm_ip): such fetches
// would otherwise spend it in the owner's name, and the link mailed to
// them would answer 429.
func (s *Server) refuseOtherSites(w http.ResponseWriter, r *http.Request) bool {
	if userFetch(r) {
		return false
	}
	s.fail(w, r, errCrossSiteFetch)
	return true
}

func (s *Server) handleResetRequestPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noReferrer(w)
		s.render(w, r, http.StatusOK, templates.ResetRequestPage(templates.ResetRequestProps{Nav: s.nav(r)}))
	})
}

func (s *Server) handleResetRequestForm() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noReferrer(w)
		form, err := decodeForm(r, templates.FieldEmail)
		if err == nil {
			err = s.auth.RequestReset(r.Context(), form[templates.FieldEmail], s.client(r))
		}
		if err == nil {
			s.render(w, r, http.StatusAccepted, templates.ResetRequestPage(templates.ResetRequestProps{Sent: true, LinkTTL: s.auth.ResetTTL()}))
			return
		}
		p := problemOf(r, err)
		s.logProblem(r, p, err)
		setRetryAfter(w, p)
		props := templates.ResetRequestProps{Email: form[templates.FieldEmail], RetryAfterSeconds: p.retryAfter}
		if p.retryAfter == 0 {
			props.Error = "Enter a valid email address."
			if p.status >= 500 {
				props.Error = p.message
			}
		}
		s.render(w, r, p.status, templates.ResetRequestPage(props))
	})
}

// emailBody is a JSON request that names one account: a reset or an
// unlock-link request.
type emailBody struct {
	Email string `json:"email"`
}

func (s *Server) handleResetRequestAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in emailBody
		err := decodeJSON(r, &in, &in.Email)
		if err == nil {
			err = s.auth.RequestReset(r.Context(), in.Email, s.client(r))
		}
		if err != nil {
			s.failJSON(w, r, err)
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"status": "accepted"})
	})
}

func (s *Server) handleResetConfirmPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noReferrer(w)
		if s.refuseOtherSites(w, r) {
			return
		}
		token := r.PathValue("token")
		err := s.auth.CheckResetToken(r.Context(), token, s.client(r))
		switch {
		case errors.Is(err, auth.ErrInvalidToken):
			s.render(w, r, http.StatusBadRequest, templates.ResetConfirmPage(templates.ResetConfirmProps{Invalid: true}))
		case err != nil:
			s.fail(w, r, err)
		default:
			s.render(w, r, http.StatusOK, templates.ResetConfirmPage(templates.ResetConfirmProps{Token: token}))
		}
	})
}

func (s *Server) handleResetConfirmForm() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noReferrer(w)
		token := r.PathValue("token")
		form, err := decodeForm(r, templates.FieldPassword, templates.FieldConfirm)
		if err == nil && form[templates.FieldPassword] != form[templates.FieldConfirm] {
			err = errNoMatch
		}
		if err == nil {
			err = s.auth.ConfirmReset(r.Context(), token, form[templates.FieldPassword], s.client(r))
		}
		if err == nil {
			// The browser signs in afresh, its cookie dropped: the session
			// the cookie names ends too, as at a sign-out, even another
			// account's than the one reset (whose sessions the reset
			// ended). One that cannot be ended keeps its cookie, so that
			// the browser does not look signed out while it is not.
			if err := s.auth.Logout(r.Context(), s.readCookie(r, sessionCookie)); err != nil {
				s.log.WarnContext(r.Context(), "ending the session of a reset's browser", "err", err)
			} else {
				s.clearCookie(w, sessionCookie)
			}
			http.Redirect(w, r, "/login?reset=done", http.StatusSeeOther)
			return
		}
		p := problemOf(r, err)
		s.logProblem(r, p, err)
		setRetryAfter(w, p)
		props := templates.ResetConfirmProps{Token: token, RetryAfterSeconds: p.retryAfter, Invalid: errors.Is(err, auth.ErrInvalidToken)}
		if p.retryAfter == 0 {
			props.Error = p.message
		}
		s.render(w, r, p.status, templates.ResetConfirmPage(props))
	})
}

type resetConfirmBody struct {
	Token    string `json:"token"`
	Password string `json:"password"`
}

func (s *Server) handleResetConfirmAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in resetConfirmBody
		err := decodeJSON(r, &in, &in.Token, &in.Password)
		if err == nil {
			err = s.auth.ConfirmReset(r.Context(), in.Token, in.Password, s.client(r))
		}
		if err != nil {
			s.failJSON(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}
