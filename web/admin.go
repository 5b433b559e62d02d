package web

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/templates"
)

// Errors of the administrators' pages.
var (
	errSignedOut = errors.New("web: sign-in required")
	errNotAdmin  = errors.New("web: administrators only")
	errBadCursor = errors.New("web: malformed events cursor")
	// errTooManyStreams: the session holds maxStreamsPerSession streams.
	errTooManyStreams = errors.New("web: too many dashboard streams for one session")
	// errTooManyExports: the session runs maxExportsPerSession exports.
	errTooManyExports = errors.New("web: too many event exports for one session")
	// errTooManySearches: the replica runs dashboard.Reader.MaxSearches
	// searches and exports.
	errTooManySearches = errors.New("web: too many event searches at once")
	// errStreamsFull: the replica holds maxStreams streams.
	errStreamsFull = errors.New("web: too many dashboard streams on this replica")
)

func navFor(sess auth.Session) templates.Nav {
	return templates.Nav{SignedIn: true, Email: sess.Email, IsAdmin: sess.IsAdmin}
}

// adminHandler serves a signed-in administrator. An error it returns is
// answered by fail, as on every other route.
type adminHandler func(w http.ResponseWriter, r *http.Request, sess auth.Session) error

// requireAdmin lets administrators through to h. A visitor without a
// session is sent to /login (the API answers 401); a session that must
// change its password is sent to do so (the API answers 403); a signed-in
// user who is not an administrator gets 403.
//
// Other sites' fetches are refused first, by requireOwner (userFetch).
func (s *Server) requireAdmin(h adminHandler) http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, _ string) error {
		if !sess.IsAdmin {
			nav := navFor(sess)
			s.failAs(w, r, &nav, errNotAdmin)
			return nil
		}
		// XCLOAK_ADMIN_MFA=required: an administrator without a factor
		// enrols one first (the API answers 403).
		switch need, err := s.auth.AdminNeedsFactor(r.Context(), sess); {
		case err != nil:
			return err
		case need && !isAPI(r):
			http.Redirect(w, r, "/account/mfa", http.StatusSeeOther)
			return nil
		case need:
			return auth.ErrFactorRequired
		}
		return h(w, r, sess)
	})
}

// errCrossSiteFetch: an account's or administrators' route, or a mailed
// link's page, asked for by another site's page, or another host's of the
// same site, other than by a link.
var errCrossSiteFetch = errors.New("web: route fetched from another site")

// ownFetch reports whether r is XCloak's own page's request, one from no
// browser, or a link to a page followed, by the fetch metadata browsers
// send (resource isolation). The session cookie is SameSite=Lax, so a
// protected application's page on a sibling host would otherwise have an
// administrator's browser fetch /admin/events.csv as an image (an export
// of 100,000 events, recorded as theirs) or hold the live dashboard's
// streams. A link from elsewhere may open a page (a user's, the event
// search), but not the export, the stream or the API, which no page of
// another site links to: another site's script could otherwise send the
// browser there, as a navigation, and run them in the administrator's
// name. Forms are guarded apart (http.CrossOriginProtection).
func ownFetch(r *http.Request) bool {
	if sameOriginFetch(r) {
		return true
	}
	return r.Method == http.MethodGet && r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document" &&
		linkable(r)
}

// userFetch is ownFetch for a route whose opening counts against a limit
// of the owner's (account_ip) or of their network (reset_confirm_ip): a
// navigation from another site passes only when the user made it (a link
// clicked, Sec-Fetch-User), not one its script made. A page that opened a
// window may send it anywhere again and again, each a navigation of a
// document as a link's is, and would otherwise spend the owner's count:
// keeping them from ending a thief's session, or their mailed link from
// opening.
func userFetch(r *http.Request) bool {
	return sameOriginFetch(r) || ownFetch(r) && (r.Header.Get("Sec-Fetch-User") == "?1" || noFetchUser(r))
}

// noFetchUser reports whether r comes from WebKit (Safari, and every
// browser on iOS), which sends Sec-Fetch-Site but never Sec-Fetch-User, a
// link followed included: its navigations from elsewhere are taken as
// links, as ownFetch takes them, or no link from a webmail or a sibling
// host would open. Blink's User-Agent names Chrome; Gecko's no WebKit.
func noFetchUser(r *http.Request) bool {
	ua := r.UserAgent()
	return strings.Contains(ua, "AppleWebKit/") && !strings.Contains(ua, "Chrome/")
}

// sameOriginFetch reports whether r is XCloak's own page's request, one a
// user typed, or one from no browser, by the fetch metadata browsers send:
// not one another site, or another host of the same site, made the
// browser send, a link followed included.
func sameOriginFetch(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	}
	return false
}

// ownRedirect reports whether r is a page's request that followed the
// redirect of XCloak's own form, as the notice it carries says ("The
// account was deleted."): same-origin, or from a browser that sends no
// fetch metadata. Not "none", which sameOriginFetch lets open a page the
// user typed: a browser sends it for a link opened from a program outside
// it too, a mail program's, and a phishing mail's link would otherwise
// have XCloak confirm an act nobody did.
func ownRedirect(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin":
		return true
	}
	return false
}

// linkable reports whether r asks for an administrators' page, which a
// link from another site may open, rather than a download, a stream or
// the API.
func linkable(r *http.Request) bool {
	return linkablePath(r.URL.Path)
}

// eventsPerPage is the length of a page of security events.
const eventsPerPage = 20

// dashboardQuery is what a dashboard URL asks for.
type dashboardQuery struct {
	period dashboard.Period
	before int64 // 0: the newest events
}

// parseDashboardQuery reads ?period=5m|1h|24h (default 5m) and, for the
// events, ?before=<id>. A parameter given twice is refused, not guessed at.
func parseDashboardQuery(q url.Values) (dashboardQuery, error) {
	out := dashboardQuery{period: dashboard.Period5m}
	if v, ok := q["period"]; ok {
		if len(v) != 1 {
			return out, dashboard.ErrInvalidPeriod
		}
		p, err := dashboard.ParsePeriod(v[0])
		if err != nil {
			return out, err
		}
		out.period = p
	}
	if v, ok := q["before"]; ok {
		if len(v) != 1 {
			return out, errBadCursor
		}
		id, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || id < 1 {
			return out, errBadCursor
		}
		out.before = id
	}
	return out, nil
}

func dashboardURL(p dashboard.Period, extra ...string) string {
	v := url.Values{"period": {p.String()}}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return "/admin?" + v.Encode()
}

// handleDashboard serves GET /admin: the whole page, complete without
// scripts.
func (s *Server) handleDashboard() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) error {
		nav := navFor(sess)
		q, err := parseDashboardQuery(r.URL.Query())
		if err != nil {
			return err
		}
		v, err := s.loadDashboard(r.Context(), q)
		if err != nil {
			return err
		}
		props := templates.DashboardProps{
			Nav:       nav,
			StreamURL: "/admin/stream?" + url.Values{"period": {q.period.String()}}.Encode(),
			AsOf:      v.asOf,
			Live:      v.live,
			Lockouts:  v.lockouts,
			Events:    v.events,
		}
		for _, p := range dashboard.Periods() {
			props.Periods = append(props.Periods, templates.PeriodLink{Label: periodWords[p].link, Href: dashboardURL(p), Current: p == q.period})
		}
		switch n := notice(r); n {
		case "unlocked":
			props.Notice = "The lockout was lifted."
		case "not-locked":
			props.Notice = "That account was not locked out; its lockout may have ended already."
		case "signed-out":
			props.Notice = "The account was signed out everywhere; its known devices are forgotten."
		case "no-account":
			props.Notice = "No account has that address."
		default:
			props.Notice = attackNotices[n]
		}
		s.render(w, r, http.StatusOK, templates.DashboardPage(props))
		return nil
	})
}

// notice is the ?notice= of r, which the redirect after an
// administrator's act carries, when r follows it (ownRedirect): a link
// from another site may open an administrators' page (linkable),
// and would otherwise have it confirm an act nobody did ("Attack mode is
// off", "The account's second factors ... were removed"). Its parameter
// is one of ownRedirectParams.
func notice(r *http.Request) string {
	if !ownRedirect(r) {
		return ""
	}
	return r.URL.Query().Get("notice")
}

// accountForm reads the form of an administrator's action on one account:
// its email and the dashboard period to return to.
func accountForm(r *http.Request) (email string, period dashboard.Period, err error) {
	form, err := decodeForm(r, templates.FieldEmail, templates.FieldPeriod)
	if err != nil {
		return "", 0, err
	}
	period = dashboard.Period5m
	if v := form[templates.FieldPeriod]; v != "" {
		if period, err = dashboard.ParsePeriod(v); err != nil {
			return "", 0, err
		}
	}
	return form[templates.FieldEmail], period, nil
}

// handleUnlock serves POST /admin/lockouts/unlock: it lifts an account's
// lockout in the administrator's name and returns to the dashboard: the
// one lock templates.FieldLock names, as the dashboard lists each apart,
// else all of them. The cross-origin check every POST passes keeps other
// sites from sending it.
func (s *Server) handleUnlock() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) error {
		email, period, err := accountForm(r)
		if err != nil {
			return err
		}
		form, err := decodeForm(r, templates.FieldLock)
		if err != nil {
			return err
		}
		var wasLocked bool
		switch lock, one := form[templates.FieldLock]; {
		case !one:
			wasLocked, err = s.auth.Unlock(r.Context(), email, "admin:"+sess.Email)
		case lock == lockPassword:
			wasLocked, err = s.auth.UnlockStep(r.Context(), email, "", "admin:"+sess.Email)
		case lock == "":
			// "" names no lock here: the password's is lockPassword.
			err = auth.ErrNoSuchLock
		default:
			wasLocked, err = s.auth.UnlockStep(r.Context(), email, lock, "admin:"+sess.Email)
		}
		// The dashboard it returns to lists the lockouts as they are now.
		s.dashboard.LockoutsChanged()
		if err != nil {
			return err
		}
		notice := "unlocked"
		if !wasLocked {
			notice = "not-locked"
		}
		http.Redirect(w, r, dashboardURL(period, "notice", notice), http.StatusSeeOther)
		return nil
	})
}

// handleSignOutEverywhere serves POST /admin/users/sign-out: it ends every
// session of an account and forgets its known devices, in the
// administrator's name, and returns to the dashboard.
func (s *Server) handleSignOutEverywhere() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) error {
		email, period, err := accountForm(r)
		if err != nil {
			return err
		}
		notice := "signed-out"
		switch err := s.auth.SignOutEverywhere(r.Context(), email, "admin:"+sess.Email); {
		case errors.Is(err, auth.ErrNoUser), errors.Is(err, auth.ErrInvalidEmail):
			notice = "no-account"
		case err != nil:
			return err
		}
		http.Redirect(w, r, dashboardURL(period, "notice", notice), http.StatusSeeOther)
		return nil
	})
}

// handleAdminStats serves GET /api/v1/admin/stats: the dashboard's
// figures as dashboard.Stats.
func (s *Server) handleAdminStats() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) error {
		q, err := parseDashboardQuery(r.URL.Query())
		if err != nil {
			return err
		}
		d, err := s.dashboard.Dashboard(r.Context(), q.period)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, dashboard.StatsOf(d))
		return nil
	})
}
