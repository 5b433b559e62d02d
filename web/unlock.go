package web

import (
	"errors"
	"net/http"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/templates"
)

// The "locked out" pages: asking for an unlock link, and the link's page,
// whose button makes the browser a known device of the account.

func (s *Server) handleUnlockRequestPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.render(w, r, http.StatusOK, templates.UnlockRequestPage(templates.UnlockRequestProps{Nav: s.nav(r)}))
	})
}

func (s *Server) handleUnlockRequestForm() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		form, err := decodeForm(r, templates.FieldEmail)
		if err == nil {
			err = s.auth.RequestUnlock(r.Context(), form[templates.FieldEmail], s.client(r))
		}
		if err == nil {
			s.render(w, r, http.StatusAccepted, templates.UnlockRequestPage(templates.UnlockRequestProps{Sent: true, LinkTTL: s.auth.UnlockTTL()}))
			return
		}
		p := problemOf(r, err)
		s.logProblem(r, p, err)
		setRetryAfter(w, p)
		props := templates.UnlockRequestProps{Email: form[templates.FieldEmail], RetryAfterSeconds: p.retryAfter}
		if p.retryAfter == 0 {
			props.Error = "Enter a valid email address."
			if p.status >= 500 {
				props.Error = p.message
			}
		}
		s.render(w, r, p.status, templates.UnlockRequestPage(props))
	})
}

func (s *Server) handleUnlockRequestAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in emailBody
		err := decodeJSON(r, &in, &in.Email)
		if err == nil {
			err = s.auth.RequestUnlock(r.Context(), in.Email, s.client(r))
		}
		if err != nil {
			s.failJSON(w, r, err)
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"status": "accepted"})
	})
}

// handleUnlockConfirmPage shows the link's button; opening the link spends
// nothing.
func (s *Server) handleUnlockConfirmPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noReferrer(w)
		if s.refuseOtherSites(w, r) {
			return
		}
		token := r.PathValue("token")
		err := s.auth.CheckUnlockToken(r.Context(), token, s.client(r))
		switch {
		case errors.Is(err, auth.ErrInvalidToken):
			s.render(w, r, http.StatusBadRequest, templates.UnlockConfirmPage(templates.UnlockConfirmProps{Invalid: true}))
		case err != nil:
			s.fail(w, r, err)
		default:
			s.render(w, r, http.StatusOK, templates.UnlockConfirmPage(templates.UnlockConfirmProps{Token: token}))
		}
	})
}

// handleUnlockConfirmForm spends the link, sets the device cookie and sends
// the browser to sign in.
func (s *Server) handleUnlockConfirmForm() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noReferrer(w)
		token := r.PathValue("token")
		_, err := decodeForm(r)
		var device auth.DeviceCookie
		if err == nil {
			device, err = s.auth.ConfirmUnlock(r.Context(), token, s.client(r))
		}
		if err == nil {
			s.setCookie(w, device.Name, device.Value, device.Expires)
			http.Redirect(w, r, "/login?unlock=done", http.StatusSeeOther)
			return
		}
		p := problemOf(r, err)
		s.logProblem(r, p, err)
		setRetryAfter(w, p)
		props := templates.UnlockConfirmProps{Token: token, RetryAfterSeconds: p.retryAfter, Invalid: errors.Is(err, auth.ErrInvalidToken)}
		if p.retryAfter == 0 {
			props.Error = p.message
		}
		s.render(w, r, p.status, templates.UnlockConfirmPage(props))
	})
}

type unlockConfirmBody struct {
	Token string `json:"token"`
}

func (s *Server) handleUnlockConfirmAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in unlockConfirmBody
		err := decodeJSON(r, &in, &in.Token)
		var device auth.DeviceCookie
		if err == nil {
			device, err = s.auth.ConfirmUnlock(r.Context(), in.Token, s.client(r))
		}
		if err != nil {
			s.failJSON(w, r, err)
			return
		}
		s.setCookie(w, device.Name, device.Value, device.Expires)
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}
