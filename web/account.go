package web

import (
	"errors"
	"net/http"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/templates"
)

func (s *Server) handleAccount() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, ok := s.session(r)
		if !ok {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		user, err := s.auth.UserByEmail(r.Context(), sess.Email)
		if errors.Is(err, auth.ErrNoUser) {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.render(w, r, http.StatusOK, templates.AccountPage(templates.AccountProps{
			Nav:         templates.Nav{SignedIn: true, Email: sess.Email, IsAdmin: sess.IsAdmin},
			Email:       sess.Email,
			IsAdmin:     sess.IsAdmin,
			MemberSince: user.CreatedAt,
			SignedInAt:  sess.CreatedAt,
		}))
	})
}
