package web

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/templates"
)

// errBadActivityPage: an activity list's limit or cursor is malformed.
var errBadActivityPage = errors.New("web: malformed activity page")

// defaultActivityPage is the entries of a page that names no limit.
const defaultActivityPage = 20

// activityPage reads a page of the activity list from the query: limit
// (1 to auth.MaxActivityPage, defaultActivityPage when absent) and cursor
// (a previous page's next_cursor, absent for the first page).
func activityPage(q url.Values) (auth.ActivityCursor, int, error) {
	var cursor auth.ActivityCursor
	limit := defaultActivityPage
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if len(v) != 1 || err != nil || n < 1 || n > auth.MaxActivityPage {
			return cursor, 0, errBadActivityPage
		}
		limit = n
	}
	if v, ok := q["cursor"]; ok {
		c, err := parseActivityCursor(v[0])
		if len(v) != 1 || err != nil {
			return cursor, 0, errBadActivityPage
		}
		cursor = c
	}
	return cursor, limit, nil
}

// activityCursor is the next_cursor after entry a: its time in Unix
// nanoseconds and its id, as "nanos-id".
func activityCursor(a auth.Activity) string {
	return strconv.FormatInt(a.At.UnixNano(), 10) + "-" + strconv.FormatInt(a.ID, 10)
}

func parseActivityCursor(s string) (auth.ActivityCursor, error) {
	at, id, ok := strings.Cut(s, "-")
	if !ok || len(s) > 40 {
		return auth.ActivityCursor{}, errBadActivityPage
	}
	nanos, err1 := strconv.ParseInt(at, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err1 != nil || err2 != nil || nanos <= 0 || n <= 0 {
		return auth.ActivityCursor{}, errBadActivityPage
	}
	return auth.ActivityCursor{At: time.Unix(0, nanos), ID: n}, nil
}

// activityJSON is one entry of GET /api/v1/account/activity.
type activityJSON struct {
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	Network string    `json:"network"`
	Count   int       `json:"count"`
	// NewDevice marks a sign-in from a browser that was not a known device.
	NewDevice bool `json:"new_device"`
	// Browser describes a sign-in's browser ("Firefox on Linux"), "" for
	// other entries.
	Browser string `json:"browser,omitempty"`
}

// activity reads the page of sess's activity the request's query asks
// for, and the page's size.
func (s *Server) activity(r *http.Request, sess auth.Session) ([]auth.Activity, int, error) {
	cursor, limit, err := activityPage(r.URL.Query())
	if err != nil {
		return nil, 0, err
	}
	list, err := s.auth.Activity(r.Context(), sess, s.client(r), cursor, limit)
	return list, limit, err
}

func (s *Server) handleActivityAPI() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, _ string) error {
		list, limit, err := s.activity(r, sess)
		if err != nil {
			return err
		}
		out := struct {
			Events     []activityJSON `json:"events"`
			NextCursor string         `json:"next_cursor,omitempty"`
		}{Events: []activityJSON{}}
		for _, a := range list {
			out.Events = append(out.Events, activityJSON{At: a.At.UTC(), Kind: a.Kind, Network: a.Network, Count: a.Count, NewDevice: a.NewDevice, Browser: a.Browser})
		}
		if len(list) == limit {
			out.NextCursor = activityCursor(list[len(list)-1])
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

func (s *Server) handleActivityPage() http.Handler {
	return s.requireOwner(func(w http.ResponseWriter, r *http.Request, sess auth.Session, _ string) error {
		list, limit, err := s.activity(r, sess)
		if err != nil {
			return err
		}
		props := templates.ActivityProps{Nav: navFor(sess)}
		for _, a := range list {
			props.Rows = append(props.Rows, templates.ActivityRow{At: a.At, Text: activityText(a), Network: a.Network})
		}
		if len(list) == limit {
			props.NextURL = "/account/activity?" + url.Values{
				"cursor": {activityCursor(list[len(list)-1])}, "limit": {strconv.Itoa(limit)}}.Encode()
		}
		s.render(w, r, http.StatusOK, templates.ActivityPage(props))
		return nil
	})
}

// activityText says what an entry of the activity page stands for.
func activityText(a auth.Activity) string {
	switch a.Kind {
	case auth.EventLoginSucceeded:
		text := "Signed in"
		if a.NewDevice {
			text = "Signed in from a new device"
		}
		if a.Browser != "" {
			text += " (" + a.Browser + ")"
		}
		return text
	case auth.EventLoginFailed:
		if a.Count == 1 {
			return "Failed sign-in attempt"
		}
		return "Failed sign-in attempts (" + strconv.Itoa(a.Count) + ")"
	case auth.EventLockout:
		return "Account locked after failed attempts"
	case auth.EventUnlock:
		return "Account unlocked"
	case auth.EventUnlockConfirmed:
		return "Unlock link used: that browser became a known device"
	case auth.EventResetCompleted:
		return "Password reset"
	case auth.EventPasswordChanged:
		return "Password changed"
	case auth.EventPasswordSet:
		return "Password set by an administrator"
	case auth.EventSessionEnded:
		return "Session ended"
	case auth.EventDeviceForgotten:
		return "Device forgotten"
	case auth.EventSignedOutEverywhere:
		return "Signed out everywhere"
	case auth.EventVerificationRequired:
		return "Sign-in held for email confirmation"
	case auth.EventVerificationConfirmed:
		return "Sign-in confirmed by email"
	case auth.EventNewDeviceSignedOut:
		return "New device signed out"
	case auth.EventFactorAdded:
		return "Second factor added"
	case auth.EventFactorRemoved:
		return "Second factor removed"
	case auth.EventRecoveryCodesRegenerated:
		return "New recovery codes made"
	case auth.EventRecoveryCodeUsed:
		return "Recovery code used to sign in"
	case auth.EventMFAFailed:
		return "Wrong second-factor code"
	case auth.EventMFALockout:
		return "Second step locked after wrong codes"
	}
	return a.Kind
}
