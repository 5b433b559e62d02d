package web

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/templates"
)

// passkeyCookie is the base name of the cookie that binds a WebAuthn
// ceremony to the browser that began it (auth.PasskeyCeremony.Binding). It
// lives as long as the ceremony, and only XCloak reads it.
const passkeyCookie = "xcloak_webauthn"

// startCeremony answers a ceremony begun: the binding cookie, and the
// options for navigator.credentials as JSON ({"publicKey": ...}).
func (s *Server) startCeremony(w http.ResponseWriter, r *http.Request, c auth.PasskeyCeremony, err error) {
	if err != nil {
		s.failJSON(w, r, err)
		return
	}
	s.setCookie(w, passkeyCookie, c.Binding, c.ExpiresAt)
	writeJSON(w, http.StatusOK, c.Options)
}

// loginPage renders the sign-in page, which offers a sign-in with a
// passkey when passkeys are on.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request, status int, props templates.LoginProps) {
	props.Passkeys = s.auth.PasskeysOn()
	s.render(w, r, status, templates.LoginPage(props))
}

// handlePasskeyEnrolPage is GET /account/mfa/passkey; with passkeys off,
// it sends back to the list of factors, which offers none.
func (s *Server) handlePasskeyEnrolPage() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, _ string) error {
		if !s.auth.PasskeysOn() {
			http.Redirect(w, r, "/account/mfa", http.StatusSeeOther)
			return nil
		}
		s.render(w, r, http.StatusOK, templates.PasskeyEnrolPage(templates.PasskeyEnrolProps{Nav: navFor(sess)}))
		return nil
	})
}

// handlePasskeyEnrolOptions is POST /account/mfa/passkey/options: the
// options of navigator.credentials.create, for the page's script.
func (s *Server) handlePasskeyEnrolOptions() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, _ string) error {
		c, err := s.auth.BeginPasskey(r.Context(), sess, s.client(r))
		s.startCeremony(w, r, c, err)
		return nil
	})
}

// handlePasskeyEnrolForm is POST /account/mfa/passkey: the name, the
// password and the credential the script created; the first factor's
// recovery codes are shown, once.
func (s *Server) handlePasskeyEnrolForm() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, token string) error {
		form, err := decodeForm(r, templates.FieldName, templates.FieldPassword)
		if err != nil {
			return err
		}
		// The credential is longer than other fields: read on its own,
		// bounded by auth.
		creds := r.PostForm[templates.FieldCredential]
		if len(creds) != 1 {
			return errBadRequest
		}
		codes, err := s.auth.FinishPasskey(r.Context(), s.factorChange(r, sess, token, form[templates.FieldPassword]),
			s.readCookie(r, passkeyCookie), form[templates.FieldName], []byte(creds[0]))
		if err == nil || !errors.Is(err, auth.ErrInvalidCredentials) && !errors.As(err, new(*auth.LimitedError)) {
			// The ceremony was spent, or never began.
			s.clearCookie(w, passkeyCookie)
		}
		switch {
		case err == nil && codes == nil:
			http.Redirect(w, r, "/account/mfa?factor=passkey", http.StatusSeeOther)
			return nil
		case err == nil:
			s.render(w, r, http.StatusOK, templates.RecoveryCodesPage(templates.RecoveryCodesProps{Nav: navFor(sess), Codes: codes, Notice: templates.PasskeyAddedText}))
			return nil
		case errors.Is(err, auth.ErrNoSession):
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return nil
		}
		p, text, failed := s.factorProblem(w, r, err)
		if failed != nil {
			return failed
		}
		if text != "" && errors.Is(err, auth.ErrInvalidRequest) {
			text = "Name the passkey in at most 64 characters, none of them invisible or a line break, type your password, and try again."
		}
		props := templates.PasskeyEnrolProps{Nav: navFor(sess), Name: form[templates.FieldName], RetryAfterSeconds: p.retryAfter, Error: text}
		s.render(w, r, p.status, templates.PasskeyEnrolPage(props))
		return nil
	})
}

type passkeyStepOptionsBody struct {
	MFAToken string `json:"mfa_token"`
}

// handleMFAPasskeyOptions is POST /api/v1/login/mfa/webauthn/options:
// {"mfa_token"}, with the second step's cookie; the options of
// navigator.credentials.get, allowing the account's passkeys.
func (s *Server) handleMFAPasskeyOptions() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in passkeyStepOptionsBody
		if err := decodeJSON(r, &in, &in.MFAToken); err != nil {
			s.failJSON(w, r, err)
			return
		}
		c, err := s.auth.BeginSecondStepPasskey(r.Context(), in.MFAToken, s.readCookie(r, mfaCookie), s.client(r))
		s.startCeremony(w, r, c, err)
	})
}

type passkeyStepBody struct {
	MFAToken   string          `json:"mfa_token"`
	Credential json.RawMessage `json:"credential"`
	Remember   bool            `json:"remember"`
}

// handleMFAPasskey is POST /api/v1/login/mfa/webauthn: {"mfa_token",
// "credential", "remember"}, with the second step's and the ceremony's
// cookies.
func (s *Server) handleMFAPasskey() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in passkeyStepBody
		err := decodeJSON(r, &in, &in.MFAToken)
		var res auth.LoginResult
		if err == nil {
			res, err = s.auth.SecondStepPasskey(r.Context(), auth.PasskeyStepRequest{
				Token: in.MFAToken, Binding: s.readCookie(r, mfaCookie), Ceremony: s.readCookie(r, passkeyCookie),
				Response: in.Credential, Remember: in.Remember, Client: s.client(r),
				Cookie: func(name string) string { return s.readCookie(r, name) }, OldSession: s.readCookie(r, sessionCookie),
			})
		}
		if err != nil {
			s.failJSON(w, r, err)
			return
		}
		s.signIn(w, res)
		s.clearCookie(w, mfaCookie)
		s.clearCookie(w, passkeyCookie)
		writeJSON(w, http.StatusOK, signedInBody(res))
	})
}

// handlePasskeySignInOptions is POST /api/v1/login/passkey/options: the
// options of navigator.credentials.get for any discoverable credential.
func (s *Server) handlePasskeySignInOptions() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := s.auth.BeginPasskeySignIn(r.Context(), s.client(r))
		s.startCeremony(w, r, c, err)
	})
}

type passkeySignInBody struct {
	Credential json.RawMessage `json:"credential"`
}

// handlePasskeySignIn is POST /api/v1/login/passkey: {"credential"}, with
// the ceremony's cookie; a sign-in without a password.
func (s *Server) handlePasskeySignIn() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in passkeySignInBody
		err := decodeJSON(r, &in)
		var res auth.LoginResult
		if err == nil {
			res, err = s.auth.PasskeySignIn(r.Context(), auth.PasskeySignInRequest{
				Ceremony: s.readCookie(r, passkeyCookie), Response: in.Credential, Client: s.client(r),
				Cookie: func(name string) string { return s.readCookie(r, name) }, OldSession: s.readCookie(r, sessionCookie),
			})
		}
		// A ceremony is answered once, right or wrong.
		s.clearCookie(w, passkeyCookie)
		if err != nil {
			s.failJSON(w, r, err)
			return
		}
		s.signIn(w, res)
		writeJSON(w, http.StatusOK, signedInBody(res))
	})
}

// signedInBody is the JSON answer of a finished sign-in, by password,
// second step, mailed link or passkey: "change_password" when the session
// may only change a breached password.
func signedInBody(res auth.LoginResult) map[string]string {
	if res.Session.MustChangePassword {
		return map[string]string{"status": "change_password"}
	}
	return map[string]string{"status": "ok"}
}
