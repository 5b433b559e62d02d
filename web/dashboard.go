package web

import (
	"cmp"
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
	v.lockouts = templates.LockoutsProps{Now: d.AsOf, Total: sum.ActiveLockouts, Cut: len(d.Lockouts) >= dashboard.LockoutsListed,
		Period: q.period.String()}
	for _, l := range d.Lockouts {
		v.lockouts.Rows = append(v.lockouts.Rows, templates.LockoutRow{
			Account: l.Account, Step: lockSteps[l.Step], Lock: cmp.Or(l.Step, lockPassword), Since: l.LockedAt, Until: l.LockedUntil, Failures: l.Failures, Level: l.Level,
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
