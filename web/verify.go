package web

import (
	"errors"
	"net/http"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/templates"
)

// New-device verification: the answer to a held sign-in, and the mailed
// link's page, whose button signs in the browser that presses it.

// held answers a sign-in held for new-device verification: the same
// status, body, headers and cookies whether the password was right, wrong
// or for no account, but for the values of the second step's token and
// binding cookie, which every held answer carries (auth/mfa_held.go). The
// page shows no email and a signed-out header, so nothing of the request
// shapes it but rd, which the code's form keeps.
func (s *Server) held(w http.ResponseWriter, r *http.Request, step auth.MFAStep, rd string) {
	if step.Token != "" {
		s.startSecondStep(w, step)
	}
	if isAPI(r) {
		body := map[string]string{"status": "verification_required"}
		if step.Token != "" {
			body["mfa_token"] = step.Token
		}
		writeJSON(w, http.StatusAccepted, body)
		return
	}
	s.heldPage(w, r, http.StatusAccepted, templates.MFAStepProps{Token: step.Token, Return: s.allowedReturn(rd)})
}

// heldPage renders the page of a held sign-in, its code's form with code.
func (s *Server) heldPage(w http.ResponseWriter, r *http.Request, status int, code templates.MFAStepProps) {
	code.RememberFor = s.auth.RememberFor()
	s.render(w, r, status, templates.VerificationSentPage(templates.VerificationSentProps{LinkTTL: s.auth.VerificationTTL(), Code: code}))
}

// handleSignInConfirmPage shows the link's button; opening the link
// spends nothing.
func (s *Server) handleSignInConfirmPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noReferrer(w)
		if s.refuseOtherSites(w, r) {
			return
		}
		token := r.PathValue("token")
		email, err := s.auth.CheckSignInToken(r.Context(), token, s.client(r))
		switch {
		case errors.Is(err, auth.ErrInvalidToken):
			s.render(w, r, http.StatusBadRequest, templates.SignInConfirmPage(templates.SignInConfirmProps{Invalid: true}))
		case err != nil:
			s.fail(w, r, err)
		default:
			// The page names the account, and the account this browser
			// is signed in to if another: a link someone else forwarded
			// must not sign a browser in to their account unnoticed.
			s.render(w, r, http.StatusOK, templates.SignInConfirmPage(templates.SignInConfirmProps{
				Nav: s.nav(r), Token: token, Account: email}))
		}
	})
}

// handleSignInConfirmForm spends the link, signs this browser in (session
// and device cookies) and sends it to its account.
func (s *Server) handleSignInConfirmForm() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noReferrer(w)
		token := r.PathValue("token")
		_, err := decodeForm(r)
		var res auth.LoginResult
		if err == nil {
			res, err = s.confirmSignIn(w, r, token)
		}
		if err == nil {
			http.Redirect(w, r, "/account", http.StatusSeeOther)
			return
		}
		if errors.Is(err, auth.ErrMFARequired) {
			s.startSecondStep(w, res.MFA)
			s.mfaStepPage(w, r, http.StatusOK, templates.MFAStepProps{Token: res.MFA.Token})
			return
		}
		p := problemOf(r, err)
		s.logProblem(r, p, err)
		setRetryAfter(w, p)
		props := templates.SignInConfirmProps{Token: token, RetryAfterSeconds: p.retryAfter, Invalid: errors.Is(err, auth.ErrInvalidToken)}
		if p.retryAfter == 0 {
			props.Error = p.message
		}
		s.render(w, r, p.status, templates.SignInConfirmPage(props))
	})
}

type signInConfirmBody struct {
	Token string `json:"token"`
}

func (s *Server) handleSignInConfirmAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in signInConfirmBody
		err := decodeJSON(r, &in, &in.Token)
		var res auth.LoginResult
		if err == nil {
			res, err = s.confirmSignIn(w, r, in.Token)
		}
		if errors.Is(err, auth.ErrMFARequired) {
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

// confirmSignIn spends a sign-in link for the browser that sent r and
// sets its cookies, for either front end. With ErrMFARequired, the device
// cookie is set and res holds the second step; so is it with an error
// after the link was spent (auth.Service.ConfirmSignIn).
func (s *Server) confirmSignIn(w http.ResponseWriter, r *http.Request, token string) (auth.LoginResult, error) {
	res, err := s.auth.ConfirmSignIn(r.Context(), token, s.client(r), s.readCookie(r, sessionCookie))
	if err != nil {
		if res.Device.Value != "" {
			s.setCookie(w, res.Device.Name, res.Device.Value, res.Device.Expires)
		}
		return res, err
	}
	s.signIn(w, res)
	return res, nil
}
