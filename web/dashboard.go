package web

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/templates"
	"github.com/xcloak/xcloak/web/live"
)

// Words for the period switcher and headings.
var periodWords = map[dashboard.Period]struct{ link, text string }{
	dashboard.Period5m:  {"5 minutes", "the last 5 minutes"},
	dashboard.Period1h:  {"1 hour", "the last hour"},
	dashboard.Period24h: {"24 hours", "the last 24 hours"},
}

// dashboardView is the dashboard's data as the templates take it.
type dashboardView struct {
	asOf     time.Time
	live     templates.LiveProps
	lockouts templates.LockoutsProps
	events   templates.EventsProps
}

// loadDashboard reads what the dashboard shows for q. The page and the
// stream both use it, so they cannot disagree.
func (s *Server) loadDashboard(ctx context.Context, q dashboardQuery) (dashboardView, error) {
	d, err := s.dashboard.Dashboard(ctx, q.period)
	if err != nil {
		return dashboardView{}, err
	}
	events, err := s.dashboard.Events(ctx, dashboard.EventFilter{BeforeID: q.before, Limit: eventsPerPage + 1})
	if err != nil {
		return dashboardView{}, err
	}
	v := dashboardView{asOf: d.AsOf}
	sum := d.Summary
	v.live = templates.LiveProps{
		PeriodText:          periodWords[q.period].text,
		Attempts:            sum.Attempts,
		Successes:           sum.Successes,
		Failures:            sum.Failures,
		Rejected:            sum.Rejected,
		Invalid:             sum.Invalid,
		Unavailable:         sum.Unavailable,
		Degraded:            d.Degraded,
		FailurePolicy:       d.FailurePolicy,
		CountersUnavailable: d.CountersUnavailable,
		ActiveLockouts:      sum.ActiveLockouts,
		Accounts:            sum.Accounts,
		AccountsWithFactor:  sum.AccountsWithFactor,
		Lockouts:            sum.Lockouts,
		ResetRequests:       sum.ResetRequests,
		MailsDropped:        sum.MailsDropped,
		WebhooksDropped:     sum.WebhooksDropped,
		TopSources:          ranked(d.TopSources),
		TopAccounts:         ranked(d.TopAccounts),
		Attack:              attackProps(d.Attack, d.AsOf),
	}
	for _, a := range sum.Applications {
		v.live.Applications = append(v.live.Applications, templates.ApplicationRow(a))
	}
	for _, rule := range rulesOf(sum) {
		label := auth.RuleLabel(rule)
		if label == "" {
			label = rule
		}
		v.live.Rules = append(v.live.Rules, templates.RuleCount{Rule: rule, Label: label, Count: sum.RejectedByRule[rule]})
	}
	for _, m := range d.Series {
		v.live.Chart = append(v.live.Chart, templates.ChartMinute{Start: m.Start, Attempts: m.Attempts, Rejected: m.Rejected})
	}
	v.lockouts = templates.LockoutsProps{Now: d.AsOf, Total: sum.ActiveLockouts, Period: q.period.String()}
	for _, l := range d.Lockouts {
		v.lockouts.Rows = append(v.lockouts.Rows, templates.LockoutRow{
			Account: l.Account, Since: l.LockedAt, Until: l.LockedUntil, Failures: l.Failures, Level: l.Level,
		})
	}
	v.events = templates.EventsProps{Now: d.AsOf}
	if len(events) > eventsPerPage {
		events = events[:eventsPerPage]
		v.events.OlderHref = dashboardURL(q.period, "before", strconv.FormatInt(events[len(events)-1].ID, 10))
	}
	if q.before != 0 {
		v.events.NewestHref = dashboardURL(q.period)
	}
	for _, e := range events {
		v.events.Rows = append(v.events.Rows, eventRow(e))
	}
	return v, nil
}

// rulesOf lists the rules of a summary: the known ones in their order,
// then any other, by name.
func rulesOf(sum dashboard.Summary) []string {
	rules := auth.RejectionRules()
	var extra []string
	for r := range sum.RejectedByRule {
		if !slices.Contains(rules, r) {
			extra = append(extra, r)
		}
	}
	slices.Sort(extra)
	return append(rules, extra...)
}

func ranked(in []dashboard.Ranked) []templates.Ranked {
	out := make([]templates.Ranked, len(in))
	for i, r := range in {
		out[i] = templates.Ranked{Name: r.Name, Count: r.Count}
	}
	return out
}

// eventRow puts a stored event into words.
func eventRow(e dashboard.StoredEvent) templates.EventRow {
	row := templates.EventRow{At: e.At, Account: e.Account, Source: e.Source, What: e.Kind}
	switch e.Kind {
	case auth.EventLoginRejected, auth.EventResetRejected, auth.EventUnlockRejected, auth.EventVerificationRejected,
		auth.EventMFARejected:
		refusalEventRow(&row, e)
	case auth.EventLoginSucceeded, auth.EventLoginFailed, auth.EventLoginInvalid, auth.EventLoginUnavailable,
		auth.EventAttemptAllowed, auth.EventResetFailed:
		signInEventRow(&row, e)
	case auth.EventUnlockRequested, auth.EventResetMailDropped, auth.EventPasswordSprayed:
		linkEventRow(&row, e)
	case auth.EventMFARequired, auth.EventMFAFailed:
		secondStepEventRow(&row, e)
	case auth.EventLockout:
		row.What = "Account locked"
		if e.Detail["device"] != "" {
			row.What = "Known device locked"
		}
		var parts []string
		if l := e.Detail["level"]; l != "" {
			parts = append(parts, "Level "+l)
		}
		if until, err := time.Parse(time.RFC3339, e.Detail["until"]); err == nil {
			parts = append(parts, "until "+until.UTC().Format("2 Jan 15:04 UTC"))
		}
		row.Detail = strings.Join(parts, ", ")
	case auth.EventLockoutEnded:
		row.What = "Lockout ended"
		row.Detail = "Its time ran out"
	case auth.EventUnlock:
		row.What = "Lockout lifted"
		by := e.Detail["by"]
		switch {
		case strings.HasPrefix(by, "admin:"):
			row.Detail = "By administrator " + strings.TrimPrefix(by, "admin:")
		case by == "success":
			row.Detail = "By a successful sign-in after it ended"
		case by == "reset":
			row.Detail = "By a password reset"
		case by == "cli":
			row.Detail = "From the command line"
		case by != "":
			row.Detail = "By " + by
		}
	case auth.EventResetRequested:
		row.What = "Password reset requested"
	case auth.EventResetCompleted:
		row.What = "Password changed by reset"
	case auth.EventPasswordChanged:
		row.What = "Password changed by its owner"
		row.Detail = "Every other session ended"
	case auth.EventSessionEnded:
		row.What = "Session ended by its owner"
		switch e.Detail["scope"] {
		case "current":
			row.What = "Signed out from the session list"
		case "others":
			row.What = "Signed out everywhere else by its owner"
			if n := e.Detail["count"]; n != "" {
				row.Detail = endedCount(n)
			}
		}
	case auth.EventDeviceForgotten:
		row.What = "Known device forgotten by its owner"
	case auth.EventNewDevice:
		row.What = "Sign-in from a new device"
	case auth.EventUnlockConfirmed:
		row.What = "Unlock link used"
		row.Detail = "The browser became a known device"
	case auth.EventAttackStarted, auth.EventAttackEnded, auth.EventAttackSwitched:
		attackEventRow(&row, e)
	case auth.EventVerificationRequired:
		row.What = "Sign-in held for new-device verification"
		row.Detail = "The right password from a new browser; a sign-in link was mailed"
		if e.Detail["breached"] == "true" {
			row.Detail = "A breached password from a new browser; the owner was asked to choose a new one"
		}
	case auth.EventNewDeviceSignedOut:
		row.What = "New browser signed out"
		row.Detail = "It first signed in moments before attack mode started"
	case auth.EventVerificationConfirmed:
		row.What = "Sign-in link used"
		row.Detail = "The browser that used it is signed in and a known device"
	case auth.EventFactorAdded:
		row.What = "Second factor added by its owner"
	case auth.EventFactorRemoved:
		row.What = "Second factor removed by its owner"
		if by := e.Detail["by"]; strings.HasPrefix(by, "admin:") {
			row.What = "Second factors removed"
			row.Detail = "By administrator " + strings.TrimPrefix(by, "admin:")
		}
	case auth.EventRecoveryCodesRegenerated:
		row.What = "New recovery codes made by their owner"
		row.Detail = "The old ones no longer work"
	case auth.EventRecoveryCodeUsed:
		row.What = "Recovery code used for the second step"
		if left := e.Detail["left"]; left != "" {
			row.Detail = left + " left"
		}
	case auth.EventPasskeyCloned:
		row.What = "Passkey refused: its signature counter went back"
		row.Detail = "The authenticator may have been copied"
	case auth.EventMFALockout:
		row.What = "Second step locked after wrong codes"
		if until, err := time.Parse(time.RFC3339, e.Detail["until"]); err == nil {
			row.Detail = "Until " + until.UTC().Format("2 Jan 15:04 UTC")
		}
	case auth.EventUserCreated, auth.EventUserDisabled, auth.EventUserEnabled, auth.EventUserDeleted, auth.EventUserPromoted,
		auth.EventUserDemoted:
		adminEventRow(&row, e)
	case auth.EventAPIKeyCreated, auth.EventAPIKeyRevoked:
		apiKeyEventRow(&row, e)
	case auth.EventSignedOutEverywhere:
		row.What = "Signed out everywhere"
		if by := e.Detail["by"]; strings.HasPrefix(by, "admin:") {
			row.Detail = "By administrator " + strings.TrimPrefix(by, "admin:")
		} else if by == "cli" {
			row.Detail = "From the command line"
		}
	}
	if times := foldedTimes(e); times != "" {
		if row.Detail != "" {
			row.Detail += "; "
		}
		row.Detail += times
	}
	return row
}

// renderLive reads and renders the live regions of a period's dashboard.
func (s *Server) renderLive(ctx context.Context, p dashboard.Period) (live.Frame, error) {
	v, err := s.loadDashboard(ctx, dashboardQuery{period: p})
	if err != nil {
		return live.Frame{}, err
	}
	var f live.Frame
	for _, part := range []struct {
		dst *string
		c   templ.Component
	}{
		{&f.Live, templates.DashboardLive(v.live)},
		{&f.Lockouts, templates.DashboardLockouts(v.lockouts)},
		{&f.Events, templates.DashboardEvents(v.events)},
	} {
		var b strings.Builder
		if err := part.c.Render(ctx, &b); err != nil {
			return live.Frame{}, err
		}
		*part.dst = b.String()
	}
	return f, nil
}

// endedCount says how many sessions an end-others ended, n in decimal.
func endedCount(n string) string {
	if n == "1" {
		return "1 session ended"
	}
	return n + " sessions ended"
}
