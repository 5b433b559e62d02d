package web

import (
	"net/http"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/templates"
)

// handleRecoveryCodesForm is POST /account/mfa/recovery, with the
// password: new recovery codes in place of all the old ones, shown once.
func (s *Server) handleRecoveryCodesForm() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, token string) error {
		form, err := decodeForm(r, templates.FieldPassword)
		if err != nil {
			return err
		}
		codes, err := s.auth.RegenerateRecoveryCodes(r.Context(), s.factorChange(r, sess, token, form[templates.FieldPassword]))
		if err != nil {
			return s.factorsFailed(w, r, sess, err)
		}
		s.render(w, r, http.StatusOK, templates.RecoveryCodesPage(templates.RecoveryCodesProps{Nav: navFor(sess), Codes: codes,
			Notice: templates.RecoveryCodesRegeneratedText}))
		return nil
	})
}
