package web

import (
	"errors"
	"net/http"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/templates"
)

// ownerHandler serves the signed-in owner of an account: sess is the
// request's session, token its cookie's value. An error it returns is
// answered by fail, as on every other route.
type ownerHandler func(w http.ResponseWriter, r *http.Request, sess auth.Session, token string) error

// requireOwner lets a signed-in session through to h. Without one a page
// sends to /login and the API answers 401; a session that must change its
// password is sent to do so (the API answers 403), as requireAdmin does.
//
// What another site's page, or a sibling host's (same-site, where the Lax
// cookie goes with images and scripts' fetches), makes the owner's
// browser fetch is refused first, as on the administrators' routes
// (ownFetch): the account's pages and lists count against account_ip,
// which such fetches would otherwise spend in the owner's name and keep
// the owner from ending a thief's session. A link followed to a page
// still opens it; a navigation another site's script made does not
// (userFetch).
func (s *Server) requireOwner(h ownerHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !userFetch(r) {
			s.failAs(w, r, nil, errCrossSiteFetch)
			return
		}
		token := s.readCookie(r, sessionCookie)
		sess, err := s.auth.Session(r.Context(), token)
		switch {
		case errors.Is(err, auth.ErrNoSession) && !isAPI(r):
			http.Redirect(w, r, "/login", http.StatusSeeOther)
		case errors.Is(err, auth.ErrNoSession):
			s.fail(w, r, errSignedOut)
		case err != nil:
			s.failAs(w, r, &templates.Nav{}, err)
		case sess.MustChangePassword && !isAPI(r):
			http.Redirect(w, r, passwordPage, http.StatusSeeOther)
		case sess.MustChangePassword:
			s.fail(w, r, errPasswordChangeRequired)
		default:
			err := h(w, r, sess, token)
			switch {
			case err == nil:
			case errors.Is(err, auth.ErrNoSession) && !isAPI(r):
				// Ended while the request was served: its account was
				// deleted meanwhile, say.
				http.Redirect(w, r, "/login", http.StatusSeeOther)
			default:
				nav := navFor(sess)
				s.failAs(w, r, &nav, err)
			}
		}
	})
}

// sessionJSON is one session in GET /api/v1/account/sessions.
type sessionJSON struct {
	ID         string    `json:"id"`
	CreatedAt  time.Time `json:"created_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
	Network    string    `json:"network"`
	Browser    string    `json:"browser"`
	Current    bool      `json:"current"`
}

// deviceJSON is one known device in GET /api/v1/account/sessions.
type deviceJSON struct {
	ID          string    `json:"id"`
	FirstSeenAt time.Time `json:"first_seen_at"`
	LastSeenAt  time.Time `json:"last_seen_at"`
}

func (s *Server) handleSessionsAPI() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, _ string) error {
		list, err := s.auth.ListSessions(r.Context(), sess, s.client(r))
		if err != nil {
			return err
		}
		out := struct {
			Sessions []sessionJSON `json:"sessions"`
			Devices  []deviceJSON  `json:"devices"`
		}{Sessions: []sessionJSON{}, Devices: []deviceJSON{}}
		for _, v := range list.Sessions {
			out.Sessions = append(out.Sessions, sessionJSON{ID: v.PublicID, CreatedAt: v.CreatedAt.UTC(), LastSeenAt: v.LastSeenAt.UTC(),
				Network: v.Network, Browser: v.Browser, Current: v.Current})
		}
		for _, v := range list.Devices {
			out.Devices = append(out.Devices, deviceJSON{ID: v.PublicID, FirstSeenAt: v.CreatedAt.UTC(), LastSeenAt: v.LastSeenAt.UTC()})
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// endSession ends the session named by the path's id; ending the
// request's own clears its cookie too. token is the request's session's.
func (s *Server) endSession(w http.ResponseWriter, r *http.Request, sess auth.Session, token string) (current bool, err error) {
	current, err = s.auth.EndSession(r.Context(), sess, token, r.PathValue("id"), s.client(r))
	if err == nil && current {
		s.clearCookie(w, sessionCookie)
	}
	return current, err
}

func (s *Server) handleEndSessionAPI() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, token string) error {
		current, err := s.endSession(w, r, sess, token)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "current": current})
		return nil
	})
}

func (s *Server) handleEndSessionForm() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, token string) error {
		current, err := s.endSession(w, r, sess, token)
		if err != nil {
			return err
		}
		if current {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return nil
		}
		http.Redirect(w, r, "/account?session=ended", http.StatusSeeOther)
		return nil
	})
}

func (s *Server) handleEndOtherSessionsForm() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, token string) error {
		if _, err := s.auth.EndOtherSessions(r.Context(), sess, token, s.client(r)); err != nil {
			return err
		}
		http.Redirect(w, r, "/account?sessions=ended", http.StatusSeeOther)
		return nil
	})
}

func (s *Server) handleForgetDeviceForm() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, token string) error {
		if err := s.auth.ForgetDevice(r.Context(), sess, token, r.PathValue("id"), s.client(r)); err != nil {
			return err
		}
		http.Redirect(w, r, "/account?device=forgotten", http.StatusSeeOther)
		return nil
	})
}

// sessionRows and deviceRows are the account page's lists.
func sessionRows(list auth.AccountSessions) ([]templates.SessionRow, []templates.DeviceRow) {
	var sessions []templates.SessionRow
	for _, v := range list.Sessions {
		sessions = append(sessions, templates.SessionRow{ID: v.PublicID, StartedAt: v.CreatedAt, LastSeenAt: v.LastSeenAt,
			Network: v.Network, Browser: v.Browser, Current: v.Current})
	}
	var devices []templates.DeviceRow
	for _, v := range list.Devices {
		devices = append(devices, templates.DeviceRow{ID: v.PublicID, FirstSeen: v.CreatedAt, LastSeen: v.LastSeenAt})
	}
	return sessions, devices
}
