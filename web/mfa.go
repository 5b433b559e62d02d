package web

import (
	"bytes"
	"encoding/base64"
	"errors"
	"image/png"
	"net/http"
	"strconv"

	"github.com/a-h/templ"
	"github.com/pquerna/otp"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/templates"
)

// mfaCookie is the base name of the cookie that binds a second step to
// the browser that got it (auth.MFAStep.Binding). It lives as long as the
// step, and only XCloak reads it.
const mfaCookie = "xcloak_mfa"

// startSecondStep sets the binding cookie of a second step; the caller
// then answers with the step's token.
func (s *Server) startSecondStep(w http.ResponseWriter, step auth.MFAStep) {
	s.setCookie(w, mfaCookie, step.Binding, step.ExpiresAt)
}

// secondStep finishes a sign-in's second step for either front end, from
// the request's binding and device cookies.
func (s *Server) secondStep(w http.ResponseWriter, r *http.Request, token, code string, remember bool) (auth.LoginResult, error) {
	res, err := s.auth.SecondStep(r.Context(), auth.SecondStepRequest{
		Token: token, Binding: s.readCookie(r, mfaCookie), Code: code, Remember: remember,
		Client: s.client(r), Cookie: func(name string) string { return s.readCookie(r, name) },
		OldSession: s.readCookie(r, sessionCookie),
	})
	if err != nil {
		return res, err
	}
	s.signIn(w, res)
	s.clearCookie(w, mfaCookie)
	return res, nil
}

// mfaStepPage answers a right password of an account with a factor: the
// page that asks for the code.
func (s *Server) mfaStepPage(w http.ResponseWriter, r *http.Request, status int, props templates.MFAStepProps) {
	props.RememberFor = s.auth.RememberFor()
	s.render(w, r, status, templates.MFAStepPage(props))
}

// handleMFAForm is POST /login/mfa, the second step's form.
func (s *Server) handleMFAForm() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		form, err := decodeForm(r, templates.FieldMFAToken, templates.FieldCode, templates.FieldRemember, templates.FieldReturn)
		var res auth.LoginResult
		if err == nil {
			res, err = s.secondStep(w, r, form[templates.FieldMFAToken], form[templates.FieldCode], form[templates.FieldRemember] == "on")
		}
		if err == nil {
			to := s.redirects.target(form[templates.FieldReturn])
			if res.Session.MustChangePassword {
				to = passwordPage
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		p := problemOf(r, err)
		s.logProblem(r, p, err)
		setRetryAfter(w, p)
		if errors.Is(err, auth.ErrInvalidToken) {
			s.clearCookie(w, mfaCookie)
			s.render(w, r, p.status, templates.ErrorPage(templates.ErrorProps{Status: p.status, Title: "Sign in again", Message: templates.MFAInvalidText}))
			return
		}
		props := templates.MFAStepProps{Token: form[templates.FieldMFAToken], Return: s.allowedReturn(form[templates.FieldReturn]),
			RetryAfterSeconds: p.retryAfter}
		if p.retryAfter == 0 {
			props.Error = p.message
			if p.status == http.StatusBadRequest {
				props.Error = "Enter the six-digit code from your app, or a recovery code."
			}
		}
		// A held sign-in's code is answered on the held page, which says
		// nothing of the password.
		if auth.IsHeldToken(props.Token) {
			s.heldPage(w, r, p.status, props)
			return
		}
		s.mfaStepPage(w, r, p.status, props)
	})
}

type mfaBody struct {
	MFAToken string `json:"mfa_token"`
	Code     string `json:"code"`
	// Remember is the form's "remember this browser" box; false when
	// absent.
	Remember bool `json:"remember"`
}

// handleMFAAPI is POST /api/v1/login/mfa: {"mfa_token","code"} and an
// optional "remember", with the binding cookie the mfa_required answer
// set.
func (s *Server) handleMFAAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in mfaBody
		err := decodeJSON(r, &in, &in.MFAToken, &in.Code)
		var res auth.LoginResult
		if err == nil {
			res, err = s.secondStep(w, r, in.MFAToken, in.Code, in.Remember)
		}
		if err != nil {
			s.failJSON(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, signedInBody(res))
	})
}

// factorChange is the proof for adding or removing a factor, from the
// request's cookies and the password typed.
func (s *Server) factorChange(r *http.Request, sess auth.Session, token, password string) auth.FactorChange {
	return auth.FactorChange{Session: token, Password: password, Client: s.client(r),
		DeviceCookie: s.readCookie(r, s.auth.DeviceCookieName(sess.Email))}
}

// factorsPage renders the list of the account's factors.
func (s *Server) factorsPage(w http.ResponseWriter, r *http.Request, sess auth.Session, status int, props templates.FactorsProps) error {
	factors, left, err := s.auth.AccountFactors(r.Context(), sess)
	if err != nil {
		return err
	}
	required, err := s.auth.AdminNeedsFactor(r.Context(), sess)
	if err != nil {
		return err
	}
	props.Nav, props.RecoveryLeft, props.Required = navFor(sess), left, required
	props.Passkeys = s.auth.PasskeysOn()
	props.Factors = factorRows(factors)
	s.render(w, r, status, templates.FactorsPage(props))
	return nil
}

// factorRows are factors as the owner's and the administrator's pages
// list them.
func factorRows(factors []auth.FactorInfo) []templates.FactorRow {
	rows := make([]templates.FactorRow, 0, len(factors))
	for _, f := range factors {
		rows = append(rows, templates.FactorRow{ID: f.ID, Name: f.Name, Kind: string(f.Kind), Added: f.ConfirmedAt, LastUsed: f.LastUsed})
	}
	return rows
}

// handleFactorsPage is GET /account/mfa.
func (s *Server) handleFactorsPage() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, _ string) error {
		var props templates.FactorsProps
		// Only after XCloak's own form's redirect, as accountNotice;
		// "factor" is one of ownRedirectParams.
		factor := ""
		if ownRedirect(r) {
			factor = r.URL.Query().Get("factor")
		}
		switch factor {
		case "added":
			props.Notice = "Your authenticator app is set up."
		case "passkey":
			props.Notice = templates.PasskeyAddedText
		case "removed":
			props.Notice = "The factor was removed."
		}
		return s.factorsPage(w, r, sess, http.StatusOK, props)
	})
}

// qrDataURL renders an otpauth:// URL as a QR code in a PNG data: URL,
// which the CSP's img-src allows: the key never leaves the page.
func qrDataURL(url string) (templ.SafeURL, error) {
	key, err := otp.NewKeyFromURL(url)
	if err != nil {
		return "", err
	}
	img, err := key.Image(200, 200)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return "", err
	}
	return templ.SafeURL("data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())), nil
}

// totpEnrolPage renders the enrolment of e.
func (s *Server) totpEnrolPage(w http.ResponseWriter, r *http.Request, sess auth.Session, status int, e auth.TOTPEnrolment, props templates.TOTPEnrolProps) error {
	qr, err := qrDataURL(e.URL)
	if err != nil {
		return err
	}
	props.Nav, props.FactorID, props.QR, props.Secret = navFor(sess), e.ID, qr, e.Secret
	s.render(w, r, status, templates.TOTPEnrolPage(props))
	return nil
}

// handleTOTPEnrolPage is GET /account/mfa/totp: a new key, unconfirmed,
// which replaces the account's pending one. Only XCloak's own pages, or
// the owner typing the address, draw one: another site that sent the
// owner's browser here (a link, a redirect; the session cookie is
// SameSite=Lax) would throw away the key the owner is scanning, so it
// gets the list of factors, which links here.
func (s *Server) handleTOTPEnrolPage() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, _ string) error {
		if !sameOriginFetch(r) {
			http.Redirect(w, r, "/account/mfa", http.StatusSeeOther)
			return nil
		}
		e, err := s.auth.BeginTOTP(r.Context(), sess, s.client(r))
		if err != nil {
			return err
		}
		return s.totpEnrolPage(w, r, sess, http.StatusOK, e, templates.TOTPEnrolProps{})
	})
}

// handleTOTPEnrolForm is POST /account/mfa/totp: the first code and the
// password confirm the key; the first factor's recovery codes are shown,
// once.
func (s *Server) handleTOTPEnrolForm() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, token string) error {
		form, err := decodeForm(r, templates.FieldFactor, templates.FieldCode, templates.FieldPassword)
		if err != nil {
			return err
		}
		id, err := strconv.ParseInt(form[templates.FieldFactor], 10, 64)
		if err != nil {
			return errBadRequest
		}
		codes, err := s.auth.ConfirmTOTP(r.Context(), s.factorChange(r, sess, token, form[templates.FieldPassword]), id, form[templates.FieldCode])
		switch {
		case err == nil && codes == nil:
			http.Redirect(w, r, "/account/mfa?factor=added", http.StatusSeeOther)
			return nil
		case err == nil:
			s.render(w, r, http.StatusOK, templates.RecoveryCodesPage(templates.RecoveryCodesProps{Nav: navFor(sess), Codes: codes}))
			return nil
		case errors.Is(err, auth.ErrNoFactor):
			http.Redirect(w, r, "/account/mfa/totp", http.StatusSeeOther)
			return nil
		case errors.Is(err, auth.ErrNoSession):
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return nil
		}
		p, text, failed := s.factorProblem(w, r, err)
		if failed != nil {
			return failed
		}
		// The key being set up is shown again only after the password
		// was right (a wrong code, to try another): a session alone, a
		// cookie left on a shared computer, must not read the key its
		// owner is scanning and keep a copy of the factor. Anything else
		// gets a new key, as a new visit does.
		var e auth.TOTPEnrolment
		var perr error
		if errors.Is(err, auth.ErrInvalidCode) {
			e, perr = s.auth.PendingTOTP(r.Context(), sess, id)
		} else {
			e, perr = s.auth.BeginTOTP(r.Context(), sess, s.client(r))
		}
		if perr != nil {
			return perr
		}
		return s.totpEnrolPage(w, r, sess, p.status, e, templates.TOTPEnrolProps{RetryAfterSeconds: p.retryAfter, Error: text})
	})
}

// factorsFailed answers a change to the account's factors that failed
// with err: the sign-in page if the session is gone, else the factors
// page with what went wrong (5xx errors go to the caller).
func (s *Server) factorsFailed(w http.ResponseWriter, r *http.Request, sess auth.Session, err error) error {
	if errors.Is(err, auth.ErrNoSession) {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return nil
	}
	p, text, failed := s.factorProblem(w, r, err)
	if failed != nil {
		return failed
	}
	return s.factorsPage(w, r, sess, p.status, templates.FactorsProps{RetryAfterSeconds: p.retryAfter, Error: text})
}

// factorProblem logs err, a failed change to the account's factors that
// its page answers itself, and sets its Retry-After. It returns err back
// for a server error, which the caller's wrapper answers; else the
// problem and what the page says of it ("" while it says when to retry).
func (s *Server) factorProblem(w http.ResponseWriter, r *http.Request, err error) (problem, string, error) {
	p := problemOf(r, err)
	s.logProblem(r, p, err)
	if p.status >= 500 {
		return p, "", err
	}
	setRetryAfter(w, p)
	switch {
	case p.retryAfter != 0:
		return p, "", nil
	case errors.Is(err, auth.ErrInvalidCredentials):
		return p, "Your password is incorrect.", nil
	}
	return p, p.message, nil
}

// handleRemoveFactorForm is POST /account/mfa/{id}/remove, with the
// password.
func (s *Server) handleRemoveFactorForm() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, token string) error {
		form, err := decodeForm(r, templates.FieldPassword)
		if err != nil {
			return err
		}
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			return auth.ErrNoFactor
		}
		err = s.auth.RemoveFactor(r.Context(), s.factorChange(r, sess, token, form[templates.FieldPassword]), id)
		switch {
		case err == nil:
			http.Redirect(w, r, "/account/mfa?factor=removed", http.StatusSeeOther)
			return nil
		}
		return s.factorsFailed(w, r, sess, err)
	})
}
