package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/templates"
)

// usersPerPage is the length of a page of the list of accounts.
const usersPerPage = 50

// lockChoices are the lengths an administrator may lock an account for.
var lockChoices = []templates.LockChoice{
	{Value: "1h0m0s", Label: "1 hour"},
	{Value: "24h0m0s", Label: "1 day"},
	{Value: "168h0m0s", Label: "7 days"},
}

// lockSteps name the second step's locks (auth.Lockout.Step) on the
// dashboard's lockouts and an account's page; the password's lockout goes
// unnamed.
var lockSteps = map[string]string{
	auth.SecondStepOwn:     "second step",
	auth.SecondStepHeld:    "second step of held sign-ins",
	auth.SecondStepPasskey: "passkeys alone",
}

// lockPassword is the FieldLock of an account's password's lockout;
// its second step's locks go by their auth.Lockout.Step.
const lockPassword = "password"

// userNotices are the words of each ?notice= of the account pages.
var userNotices = map[string]string{
	"disabled":        "The account is disabled: its sessions ended and its sign-ins fail as a wrong password does.",
	"enabled":         "The account is enabled: it signs in with its password.",
	"promoted":        "The account is an administrator.",
	"demoted":         "The account is no administrator any more.",
	"locked":          "New browsers are locked out of the account; its known devices still sign in.",
	"unlocked":        "The lockout was lifted.",
	"not-locked":      "The account was not locked out; its lockout may have ended already.",
	"reset-sent":      "A password reset link is on its way to the account's address.",
	"signed-out":      "The account was signed out everywhere; its known devices are forgotten.",
	"deleted":         "The account was deleted. Its security events stay.",
	"last-admin":      "That would leave no enabled administrator: promote another account first.",
	"disabled-no-op":  "The account is disabled: enable it before sending it a reset link.",
	"factors-removed": "The account's second factors and recovery codes were removed; its owner was mailed.",
	"no-factors":      "That account has no second factor.",
}

// byAdmin names an administrator in the events of their actions, as the
// dashboard's unlock and sign-out do.
func byAdmin(sess auth.Session) string { return "admin:" + sess.Email }

// usersQuery reads ?q= and ?after= of the list and its API; a parameter
// given twice is refused.
func usersQuery(v url.Values) (q, after string, err error) {
	for _, name := range []string{templates.FieldUserQuery, "after"} {
		if len(v[name]) > 1 {
			return "", "", &auth.FieldError{Field: name, Message: "is given more than once"}
		}
	}
	return v.Get(templates.FieldUserQuery), v.Get("after"), nil
}

// usersURL is the list with search q from after.
func usersURL(q, after string) string {
	v := url.Values{}
	if q != "" {
		v.Set(templates.FieldUserQuery, q)
	}
	if after != "" {
		v.Set("after", after)
	}
	if len(v) == 0 {
		return "/admin/users"
	}
	return "/admin/users?" + v.Encode()
}

// usersPage reads the page of accounts r asks for.
func (s *Server) usersPage(r *http.Request) (q, after string, page auth.UserPage, err error) {
	q, after, err = usersQuery(r.URL.Query())
	if err != nil {
		return "", "", page, err
	}
	page, err = s.auth.SearchUsers(r.Context(), q, after, usersPerPage)
	return q, after, page, err
}

func userRow(u auth.User) templates.UserRow {
	return templates.UserRow{ID: u.ID, Email: u.Email, Admin: u.IsAdmin, Disabled: u.Disabled(), Created: u.CreatedAt}
}

// handleUsers serves GET /admin/users: the accounts whose email starts
// with ?q=, 50 a page.
func (s *Server) handleUsers() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) error {
		q, after, page, err := s.usersPage(r)
		if err != nil {
			return err
		}
		props := templates.UsersProps{Nav: navFor(sess), Query: q, Notice: userNotices[notice(r)]}
		for _, u := range page.Users {
			props.Rows = append(props.Rows, userRow(u))
		}
		if page.Next != "" {
			props.NextHref = usersURL(q, page.Next)
		}
		if after != "" {
			props.FirstHref = usersURL(q, "")
		}
		s.render(w, r, http.StatusOK, templates.UsersPage(props))
		return nil
	})
}

// userJSON is one account in GET /api/v1/admin/users.
type userJSON struct {
	ID         int64      `json:"id"`
	Email      string     `json:"email"`
	Admin      bool       `json:"admin"`
	Disabled   bool       `json:"disabled"`
	CreatedAt  time.Time  `json:"created_at"`
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
}

// handleUsersAPI serves GET /api/v1/admin/users: the page of
// /admin/users in JSON, with the cursor of the next page.
func (s *Server) handleUsersAPI() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, _ auth.Session) error {
		_, _, page, err := s.usersPage(r)
		if err != nil {
			return err
		}
		out := struct {
			Users      []userJSON `json:"users"`
			NextCursor string     `json:"next_cursor,omitempty"`
		}{Users: []userJSON{}, NextCursor: page.Next}
		for _, u := range page.Users {
			j := userJSON{ID: u.ID, Email: u.Email, Admin: u.IsAdmin, Disabled: u.Disabled(), CreatedAt: u.CreatedAt.UTC()}
			if u.Disabled() {
				at := u.DisabledAt.UTC()
				j.DisabledAt = &at
			}
			out.Users = append(out.Users, j)
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// pathUser reads the {id} of an account page: an id that is no positive
// number is an account that does not exist.
func pathUser(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, auth.ErrNoUser
	}
	return id, nil
}

// handleUser serves GET /admin/users/{id}: one account, its latest
// events and the actions on it.
func (s *Server) handleUser() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) error {
		id, err := pathUser(r)
		if err != nil {
			return err
		}
		d, err := s.auth.UserDetail(r.Context(), id)
		if err != nil {
			return err
		}
		events, err := s.recentEvents(r.Context(), d.User.Email)
		if err != nil {
			return err
		}
		props := templates.UserProps{
			Nav: navFor(sess), Notice: userNotices[notice(r)],
			User: userRow(d.User), Self: d.User.ID == sess.UserID, Sessions: d.Sessions,
			LockChoices: lockChoices, Events: events, Now: time.Now(),
			EventsHref: templates.EventSearchHref(templates.FieldSearchAccount, d.User.Email),
		}
		if d.Locked {
			props.LockedUntil = d.Lockout.LockedUntil
		}
		for _, l := range d.SecondStepLocks {
			props.SecondStepLocks = append(props.SecondStepLocks, templates.StepLock{Step: lockSteps[l.Step], Until: l.LockedUntil})
		}
		factors, left, err := s.auth.UserFactors(r.Context(), id)
		if err != nil {
			return err
		}
		props.Factors, props.RecoveryLeft = factorRows(factors), left
		for _, dev := range d.Devices {
			props.Devices = append(props.Devices, templates.DeviceRow{ID: dev.PublicID, FirstSeen: dev.CreatedAt, LastSeen: dev.LastSeenAt})
		}
		s.render(w, r, http.StatusOK, templates.UserPage(props))
		return nil
	})
}

// recentEvents reads an account's latest events through the event search.
func (s *Server) recentEvents(ctx context.Context, email string) ([]templates.EventRow, error) {
	var rows []templates.EventRow
	err := s.dashboard.SearchEvents(ctx, dashboard.EventSearch{Account: email, Limit: auth.RecentUserEvents}, func(e dashboard.StoredEvent) error {
		rows = append(rows, eventRow(e))
		return nil
	})
	return rows, err
}

// handleUserDeletePage serves GET /admin/users/{id}/delete: the page that
// confirms deleting an account. Nothing is deleted but by its POST.
func (s *Server) handleUserDeletePage() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) error {
		id, err := pathUser(r)
		if err != nil {
			return err
		}
		u, err := s.auth.UserByID(r.Context(), id)
		if err != nil {
			return err
		}
		s.render(w, r, http.StatusOK, templates.UserDeletePage(templates.UserDeleteProps{Nav: navFor(sess), User: userRow(u)}))
		return nil
	})
}

// userAction is what one action on an account does, in the name of the
// administrator by; it returns the notice to show.
type userAction func(ctx context.Context, s *Server, r *http.Request, id int64, by string) (notice string, err error)

// handleUserAction serves POST /admin/users/{id}/<action>: it does act
// and returns to the account's page (to the list after a deletion) with
// its notice. The cross-origin check every POST passes keeps other sites
// from sending it. A refusal that is the administrator's to understand
// (the last administrator, a disabled account's reset link) is a notice
// too.
func (s *Server) handleUserAction(act userAction) http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) error {
		id, err := pathUser(r)
		if err != nil {
			return err
		}
		// The one field any action reads (lock's length), checked as
		// every form field is: once at most, bounded, valid UTF-8.
		if _, err := decodeForm(r, templates.FieldLockFor); err != nil {
			return err
		}
		notice, err := act(r.Context(), s, r, id, byAdmin(sess))
		// A lock, an unlock, a deletion: the dashboard lists the
		// lockouts as they are now.
		s.dashboard.LockoutsChanged()
		switch {
		case errors.Is(err, auth.ErrLastAdmin):
			notice = "last-admin"
		case errors.Is(err, auth.ErrUserDisabled):
			notice = "disabled-no-op"
		case err != nil:
			return err
		}
		to := templates.UserHref(id)
		if notice == "deleted" {
			to = "/admin/users"
		}
		http.Redirect(w, r, to+"?"+url.Values{"notice": {notice}}.Encode(), http.StatusSeeOther)
		return nil
	})
}

// The actions of the account page.
var (
	// removeUserFactors removes every factor of an account whose owner
	// lost them; audited, and the owner mailed.
	removeUserFactors userAction = func(ctx context.Context, s *Server, _ *http.Request, id int64, by string) (string, error) {
		u, err := s.auth.UserByID(ctx, id)
		if err != nil {
			return "", err
		}
		n, err := s.auth.RemoveFactors(ctx, by, u.Email)
		if err == nil && n == 0 {
			return "no-factors", nil
		}
		return "factors-removed", err
	}
	disableUser userAction = func(ctx context.Context, s *Server, _ *http.Request, id int64, by string) (string, error) {
		_, err := s.auth.DisableUser(ctx, id, by)
		return "disabled", err
	}
	enableUser userAction = func(ctx context.Context, s *Server, _ *http.Request, id int64, by string) (string, error) {
		_, err := s.auth.EnableUser(ctx, id, by)
		return "enabled", err
	}
	promoteUser userAction = func(ctx context.Context, s *Server, _ *http.Request, id int64, by string) (string, error) {
		_, err := s.auth.PromoteUser(ctx, id, by)
		return "promoted", err
	}
	demoteUser userAction = func(ctx context.Context, s *Server, _ *http.Request, id int64, by string) (string, error) {
		_, err := s.auth.DemoteUser(ctx, id, by)
		return "demoted", err
	}
	deleteUser userAction = func(ctx context.Context, s *Server, _ *http.Request, id int64, by string) (string, error) {
		_, err := s.auth.DeleteUser(ctx, id, by)
		return "deleted", err
	}
	sendResetLink userAction = func(ctx context.Context, s *Server, _ *http.Request, id int64, by string) (string, error) {
		_, err := s.auth.SendResetLink(ctx, id, by)
		return "reset-sent", err
	}
	lockUser userAction = func(ctx context.Context, s *Server, r *http.Request, id int64, by string) (string, error) {
		d, err := lockFor(r.PostForm.Get(templates.FieldLockFor))
		if err != nil {
			return "", err
		}
		_, err = s.auth.LockUser(ctx, id, d, by)
		return "locked", err
	}
	unlockUser userAction = func(ctx context.Context, s *Server, _ *http.Request, id int64, by string) (string, error) {
		u, err := s.auth.UserByID(ctx, id)
		if err != nil {
			return "", err
		}
		wasLocked, err := s.auth.Unlock(ctx, u.Email, by)
		if !wasLocked {
			return "not-locked", err
		}
		return "unlocked", err
	}
	signOutUser userAction = func(ctx context.Context, s *Server, _ *http.Request, id int64, by string) (string, error) {
		u, err := s.auth.UserByID(ctx, id)
		if err != nil {
			return "", err
		}
		return "signed-out", s.auth.SignOutEverywhere(ctx, u.Email, by)
	}
)

// lockFor reads the length of a lock: one of lockChoices.
func lockFor(v string) (time.Duration, error) {
	for _, c := range lockChoices {
		if c.Value == v {
			return time.ParseDuration(v)
		}
	}
	return 0, &auth.FieldError{Field: templates.FieldLockFor, Message: "must be one of " + strings.Join(lockValues(), ", ")}
}

func lockValues() []string {
	out := make([]string, len(lockChoices))
	for i, c := range lockChoices {
		out[i] = c.Value
	}
	return out
}

// adminEventRow words the events of account administration.
func adminEventRow(row *templates.EventRow, e dashboard.StoredEvent) {
	switch e.Kind {
	case auth.EventUserCreated:
		row.What = "Account created"
		if e.Detail["role"] == "admin" {
			row.What = "Administrator account created"
		}
	case auth.EventUserDisabled:
		row.What = "Account disabled"
	case auth.EventUserEnabled:
		row.What = "Account enabled"
	case auth.EventUserDeleted:
		row.What = "Account deleted"
	case auth.EventUserPromoted:
		row.What = "Account made an administrator"
	case auth.EventUserDemoted:
		row.What = "Account made a member"
	case auth.EventPasswordSet:
		row.What = "Password set, every session ended"
	}
	row.Detail = adminBy(e.Detail["by"])
}

// apiKeyEventRow words the events of the decision API's keys, which name
// the application and the key's id, never the key.
func apiKeyEventRow(row *templates.EventRow, e dashboard.StoredEvent) {
	row.What = "API key created"
	if e.Kind == auth.EventAPIKeyRevoked {
		row.What = "API key revoked"
	}
	parts := []string{"Application " + e.Detail["app"] + ", key " + e.Detail["key_id"]}
	if by := adminBy(e.Detail["by"]); by != "" {
		parts = append(parts, strings.ToLower(by[:1])+by[1:])
	}
	row.Detail = strings.Join(parts, ", ")
}

// adminBy says who did an administrator's act, from its detail "by".
func adminBy(by string) string {
	switch {
	case strings.HasPrefix(by, "admin:"):
		return "By administrator " + strings.TrimPrefix(by, "admin:")
	case by == "cli":
		return "From the command line"
	case by == "dev":
		return "By development mode (the demo admin)"
	}
	return ""
}
