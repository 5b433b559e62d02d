package web

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/templates"
)

// errBadAttackMode: the attack mode switch sent neither "on" nor "off".
var errBadAttackMode = errors.New("web: attack mode must be on or off")

// handleAttackSwitch serves POST /admin/attack: it switches attack mode
// on or off (field FieldAttackMode) in the administrator's name and
// returns to the dashboard. Like every POST it passes the cross-origin
// check, and like every admin page it needs an administrator's session.
func (s *Server) handleAttackSwitch() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) error {
		form, err := decodeForm(r, templates.FieldAttackMode, templates.FieldPeriod)
		if err != nil {
			return err
		}
		period := dashboard.Period5m
		if v := form[templates.FieldPeriod]; v != "" {
			if period, err = dashboard.ParsePeriod(v); err != nil {
				return err
			}
		}
		var on bool
		switch form[templates.FieldAttackMode] {
		case "on":
			on = true
		case "off":
		default:
			return errBadAttackMode
		}
		if s.dashboard == nil {
			return fmt.Errorf("%w: %w", auth.ErrUnavailable, dashboard.ErrNoAttackWatch)
		}
		changed, err := s.dashboard.SwitchAttack(r.Context(), on, "admin:"+sess.Email)
		if err != nil {
			return fmt.Errorf("%w: switching attack mode: %w", auth.ErrUnavailable, err)
		}
		notice := "attack-unchanged"
		switch {
		case changed && on:
			notice = "attack-on"
		case changed:
			notice = "attack-off"
		case on:
			// Already on, now held on by the administrator.
			notice = "attack-held"
		}
		http.Redirect(w, r, dashboardURL(period, "notice", notice), http.StatusSeeOther)
		return nil
	})
}

// attackNotices are the dashboard's words after a switch.
var attackNotices = map[string]string{
	"attack-on":        "Attack mode is on. It stays on until an administrator switches it off.",
	"attack-held":      "Attack mode was already on; it now stays on until an administrator switches it off.",
	"attack-off":       "Attack mode is off. It will not switch itself on again during its quiet period.",
	"attack-unchanged": "Attack mode was already off. It will not switch itself on again during its quiet period.",
}

// attackProps puts attack mode and the panel's figures into the
// template's terms.
func attackProps(a dashboard.Attack, now time.Time) templates.AttackProps {
	p := templates.AttackProps{
		Active: a.Active, Since: a.Since, Automatic: a.Trigger == "automatic", By: strings.TrimPrefix(a.By, "admin:"), Now: now,
		PeriodText: "the last 5 minutes",
		Attempts:   a.Attempts, Failures: a.Failures, UnknownAccounts: a.UnknownAccounts, Rejected: a.Rejected, Held: a.Held,
		DistinctAccounts: a.DistinctAccounts, DistinctNetworks: a.DistinctNetworks, TopNetworks: ranked(a.TopNetworks),
	}
	return p
}

// attackEventRow puts an attack_started or attack_ended event into words.
func attackEventRow(row *templates.EventRow, e dashboard.StoredEvent) {
	by := strings.TrimPrefix(e.Detail["by"], "admin:")
	switch e.Kind {
	case auth.EventAttackStarted:
		row.What = "Attack mode on"
		if e.Detail["trigger"] == "admin" {
			row.Detail = "By administrator " + by
		} else {
			row.Detail = fmt.Sprintf("Automatically: %s attempts, %s wrong passwords, %s unknown accounts in %s",
				e.Detail["attempts"], e.Detail["failures"], e.Detail["unknown_accounts"], e.Detail["window"])
		}
	case auth.EventAttackSwitched:
		if e.Detail["mode"] == "on" {
			row.What = "Attack mode kept on"
			row.Detail = "By administrator " + by + ": it stays on until switched off"
		} else {
			row.What = "Attack detection held off"
			row.Detail = "By administrator " + by + ": attack mode will not switch itself on during the quiet period"
		}
	case auth.EventAttackEnded:
		row.What = "Attack mode off"
		// Only an administrator's switch ends attack mode with a "by".
		if by != "" {
			row.Detail = "By administrator " + by
		} else {
			row.Detail = "After its quiet period"
		}
	}
}
