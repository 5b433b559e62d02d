package templates

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

var dashNow = time.Date(2025, 3, 10, 14, 7, 30, 0, time.UTC)

// sampleChart is an hour with traffic in a few minutes; busy marks the
// minutes ago that carry it.
func sampleChart(busy map[int]ChartMinute) []ChartMinute {
	out := make([]ChartMinute, 60)
	start := dashNow.Truncate(time.Minute).Add(-59 * time.Minute)
	for i := range out {
		m := busy[59-i]
		m.Start = start.Add(time.Duration(i) * time.Minute)
		out[i] = m
	}
	return out
}

func periodLinks(current string) []PeriodLink {
	var out []PeriodLink
	for _, p := range []struct{ label, key string }{{"5 minutes", "5m"}, {"1 hour", "1h"}, {"24 hours", "24h"}} {
		out = append(out, PeriodLink{Label: p.label, Href: "/admin?period=" + p.key, Current: p.key == current})
	}
	return out
}

func sampleRules(loginIP, lockout int64) []RuleCount {
	return []RuleCount{
		{Rule: "login_ip", Label: "Sign-ins per address", Count: loginIP},
		{Rule: "login_account", Label: "Sign-ins per account"},
		{Rule: "lockout", Label: "Account lockout", Count: lockout},
		{Rule: "reset_ip", Label: "Reset requests per address"},
	}
}

// busyDashboard is a dashboard under attack, with hostile values wherever
// users choose the text.
func busyDashboard() DashboardProps {
	return DashboardProps{
		Nav:       admin,
		Periods:   periodLinks("5m"),
		StreamURL: "/admin/stream?period=5m",
		AsOf:      dashNow,
		Notice:    "The lockout was lifted.",
		Live: LiveProps{
			PeriodText: "the last 5 minutes",
			Attempts:   12345, Successes: 45, Failures: 300, Rejected: 12000, ActiveLockouts: 2, Lockouts: 3, ResetRequests: 1, MailsDropped: 4,
			Rules:       sampleRules(11000, 1000),
			Chart:       sampleChart(map[int]ChartMinute{0: {Attempts: 40, Rejected: 30}, 1: {Attempts: 2500, Rejected: 2400}, 30: {Attempts: 5}}),
			TopSources:  []Ranked{{"203.0.113.7", 9000}, {"2001:db8:1::/64", 3000}},
			TopAccounts: []Ranked{{hostile, 50}, {"ann@example.com", 20}},
		},
		Lockouts: LockoutsProps{Now: dashNow, Total: 2, Period: "5m", Rows: []LockoutRow{
			{Account: hostile, Lock: "password", Since: dashNow.Add(-3 * time.Minute), Until: dashNow.Add(12 * time.Minute), Failures: 10, Level: 1},
			{Account: "ann@example.com", Step: "second step", Lock: "own", Since: dashNow.Add(-26 * time.Hour), Until: dashNow.Add(90 * time.Minute), Failures: 30, Level: 3},
		}},
		Events: EventsProps{Now: dashNow, OlderHref: "/admin?before=41&period=5m", Rows: []EventRow{
			{At: dashNow.Add(-time.Minute), What: "Account locked", Account: hostile, Source: "203.0.113.7", Detail: "Level 1, until 10 Mar 14:19 UTC"},
			{At: dashNow.Add(-25 * time.Hour), What: "Sign-in from a new device", Account: "ann@example.com", Source: "198.51.100.2"},
		}},
	}
}

// quietDashboard is a dashboard with nothing to show.
func quietDashboard() DashboardProps {
	return DashboardProps{
		Nav: admin, Periods: periodLinks("1h"), StreamURL: "/admin/stream?period=1h", AsOf: dashNow,
		Live:     LiveProps{PeriodText: "the last hour", Rules: sampleRules(0, 0), Chart: sampleChart(nil)},
		Lockouts: LockoutsProps{Now: dashNow, Period: "1h"},
		Events:   EventsProps{Now: dashNow},
	}
}

func TestDashboardPageIsWellFormed(t *testing.T) {
	paged := busyDashboard()
	paged.Events.NewestHref = "/admin?period=5m"
	for name, p := range map[string]DashboardProps{"busy": busyDashboard(), "quiet": quietDashboard(), "older events": paged} {
		t.Run(name, func(t *testing.T) {
			out, doc := render(t, DashboardPage(p))
			if got := len(elements(doc, "h1")); got != 1 {
				t.Errorf("<h1> count = %d, want 1", got)
			}
			if got := text(elements(doc, "title")[0]); got != "Security dashboard · XCloak" {
				t.Errorf("<title> = %q", got)
			}
			if strings.Contains(out, hostile) {
				t.Errorf("output contains %q unescaped", hostile)
			}
			for _, bad := range []string{"style=", "<style"} {
				if strings.Contains(strings.ToLower(out), bad) {
					t.Errorf("output contains %q, which the Content-Security-Policy blocks", bad)
				}
			}
			ids := map[string]bool{}
			for d := range doc.Descendants() {
				if d.Type != html.ElementNode {
					continue
				}
				for _, a := range d.Attr {
					if strings.HasPrefix(a.Key, "on") {
						t.Errorf("<%s> has event handler attribute %s", d.Data, a.Key)
					}
					if a.Key == "id" {
						if ids[a.Val] {
							t.Errorf("id %q used more than once", a.Val)
						}
						ids[a.Val] = true
					}
				}
			}
			for d := range doc.Descendants() {
				for _, key := range []string{"aria-labelledby", "aria-describedby"} {
					if ref, ok := attr(d, key); ok {
						for _, r := range strings.Fields(ref) {
							if !ids[r] {
								t.Errorf("<%s %s=%q> names an id not on the page", d.Data, key, r)
							}
						}
					}
				}
			}
			scripts := elements(doc, "script")
			if len(scripts) != 1 {
				t.Fatalf("%d scripts, want the one dashboard.js", len(scripts))
			}
			if src, _ := attr(scripts[0], "src"); src != "/static/dashboard.js" || scripts[0].FirstChild != nil {
				t.Errorf("script src %q with inline content %v; want /static/dashboard.js and no inline code", src, scripts[0].FirstChild != nil)
			}
			// Every visible input has a label (the sign-out form's email).
			labelled := map[string]bool{}
			for _, l := range elements(doc, "label") {
				if f, ok := attr(l, "for"); ok {
					labelled[f] = true
				}
			}
			for _, in := range elements(doc, "input") {
				id, _ := attr(in, "id")
				if typ, _ := attr(in, "type"); typ != "hidden" && !labelled[id] {
					t.Errorf("visible input %q (id %q) has no label", typ, id)
				}
			}
			// Every wide table scrolls in its own keyboard-reachable region.
			for _, tbl := range elements(doc, "table") {
				if c, _ := attr(tbl.Parent, "class"); c == "visually-hidden" {
					continue
				}
				wrap := tbl.Parent
				if c, _ := attr(wrap, "class"); c != "table-wrap" {
					t.Errorf("a table is not in a .table-wrap")
				} else if tab, _ := attr(wrap, "tabindex"); tab != "0" {
					t.Errorf("a .table-wrap cannot be reached by keyboard")
				}
			}
			current := 0
			for _, a := range elements(doc, "a") {
				if v, _ := attr(a, "aria-current"); v == "page" {
					current++
				}
			}
			if current != 1 {
				t.Errorf("%d period links marked current, want 1", current)
			}
		})
	}
}

func TestDashboardFigures(t *testing.T) {
	_, doc := render(t, DashboardLive(busyDashboard().Live))
	figures := map[string]string{}
	for d := range doc.Descendants() {
		for _, key := range []string{"data-counter", "data-rule"} {
			if v, ok := attr(d, key); ok {
				figures[v] = text(d)
			}
		}
	}
	for key, want := range map[string]string{
		"attempts": "12,345", "successes": "45", "failures": "300", "rejected": "12,000", "active_lockouts": "2",
		"lockouts": "3", "reset_requests": "1", "mails_dropped": "4", "login_ip": "11,000", "lockout": "1,000", "login_account": "0",
	} {
		if figures[key] != want {
			t.Errorf("%s shows %q, want %q", key, figures[key], want)
		}
	}
	all := text(doc)
	for _, want := range []string{"Sign-ins in the last 5 minutes", "97% of attempts", "203.0.113.7", "2001:db8:1::/64", "9,000"} {
		if !strings.Contains(all, want) {
			t.Errorf("the live region does not say %q", want)
		}
	}
	if strings.Contains(all, "No sign-in traffic") {
		t.Error("a busy period shows the empty state")
	}
}

func TestDashboardEmptyState(t *testing.T) {
	out, doc := render(t, DashboardPage(quietDashboard()))
	all := text(doc)
	for _, want := range []string{
		"No sign-in traffic in the last hour.",
		"No rejected requests in the last hour.",
		"No failed or rejected requests in the last hour.",
		"No accounts are locked out.",
		"No security events yet.",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the quiet page does not say %q", want)
		}
	}
	if strings.Contains(out, "<svg class=\"chart\"") || strings.Contains(all, "Older events") {
		t.Error("the quiet page draws a chart or links to older events")
	}
}

func TestDashboardChart(t *testing.T) {
	minutes := sampleChart(map[int]ChartMinute{0: {Attempts: 40, Rejected: 30}, 1: {Attempts: 2500, Rejected: 2400}, 30: {Attempts: 5}})
	out, doc := render(t, chart(minutes))
	var svg *html.Node
	for _, s := range elements(doc, "svg") {
		if c, _ := attr(s, "class"); c == "chart" {
			svg = s
		}
	}
	if svg == nil {
		t.Fatal("no chart")
	}
	if role, _ := attr(svg, "role"); role != "img" {
		t.Errorf("chart role %q, want img", role)
	}
	if title := elements(svg, "title"); len(title) != 1 || !strings.Contains(text(title[0]), "Busiest minute: 14:06 UTC, 2,500 attempts, 2,400 rejected.") {
		t.Errorf("chart title does not describe the peak: %v", text(svg))
	}
	var bars, dots int
	for _, r := range elements(svg, "rect") {
		if c, _ := attr(r, "class"); c == "chart-bar" {
			bars++
			if f, _ := attr(r, "fill"); f != "url(#chart-hatch)" {
				t.Errorf("a rejection bar is filled %q, not with the hatch pattern", f)
			}
		}
	}
	for _, c := range elements(svg, "circle") {
		if cl, _ := attr(c, "class"); cl == "chart-dot" {
			dots++
		}
	}
	if bars != 2 || dots != 3 {
		t.Errorf("%d bars and %d dots, want 2 hatched bars (minutes with rejections) and 3 dots (minutes with attempts)", bars, dots)
	}
	legend := text(elements(doc, "ul")[0])
	if !strings.Contains(legend, "Sign-in attempts") || !strings.Contains(legend, "Rejected sign-ins") {
		t.Errorf("legend %q does not name both series", legend)
	}
	var hidden *html.Node
	for _, tbl := range elements(doc, "table") {
		if c, _ := attr(tbl.Parent, "class"); c == "visually-hidden" {
			hidden = tbl
		}
	}
	if hidden == nil {
		t.Fatal("no data table behind the chart")
	}
	if rows := len(elements(hidden, "tr")); rows != 1+3 {
		t.Errorf("data table has %d rows, want a header and the 3 minutes with traffic", rows)
	}
	// Tick labels every 15 minutes of the clock: 13:15, 13:30, 13:45, 14:00.
	for _, want := range []string{">13:15<", ">13:30<", ">13:45<", ">14:00<", ">1k<", ">4k<", ">0<"} {
		if !strings.Contains(out, want) {
			t.Errorf("chart lacks the label %s", want)
		}
	}
}

func TestDashboardLockouts(t *testing.T) {
	_, doc := render(t, DashboardLockouts(busyDashboard().Lockouts))
	forms := elements(doc, "form")
	if len(forms) != 2 {
		t.Fatalf("%d unlock forms, want 2", len(forms))
	}
	for i, f := range forms {
		method, _ := attr(f, "method")
		action, _ := attr(f, "action")
		if method != "post" || action != "/admin/lockouts/unlock" {
			t.Errorf("form %d: %s %s, want post /admin/lockouts/unlock", i, method, action)
		}
		values := map[string]string{}
		for _, in := range elements(f, "input") {
			name, _ := attr(in, "name")
			values[name], _ = attr(in, "value")
		}
		row := busyDashboard().Lockouts.Rows[i]
		want := row.Account
		if values[FieldEmail] != want || values[FieldLock] != row.Lock || values[FieldPeriod] != "5m" {
			t.Errorf("form %d posts %v, want email %q, lock %q and period 5m", i, values, want, row.Lock)
		}
		if row.Step != "" {
			want += " (" + row.Step + ")"
		}
		if b := elements(f, "button"); len(b) != 1 || strings.Join(strings.Fields(text(b[0])), " ") != "Unlock "+want {
			t.Errorf("form %d: button %q does not name the lock", i, text(b[0]))
		}
	}
	all := text(doc)
	for _, want := range []string{"2 accounts are locked out.", "14:04 UTC", "(in 12 min)", "9 Mar 12:07 UTC", "(in 1 h 30 min)"} {
		if !strings.Contains(all, want) {
			t.Errorf("lockouts table does not say %q: %s", want, all)
		}
	}
	// The second step's lock says so; the password's says nothing more.
	heads := elements(doc, "th")
	var rowHeads []string
	for _, th := range heads {
		if scope, _ := attr(th, "scope"); scope == "row" {
			rowHeads = append(rowHeads, strings.Join(strings.Fields(text(th)), " "))
		}
	}
	if want := []string{hostile, "ann@example.com (second step)"}; !slices.Equal(rowHeads, want) {
		t.Errorf("lockouts' accounts = %q, want %q", rowHeads, want)
	}
	// A list cut short says so, in locks: an account may have several.
	cut := busyDashboard().Lockouts
	cut.Total, cut.Cut = 1500, true
	_, doc = render(t, DashboardLockouts(cut))
	if want := "1,500 accounts are locked out; the 2 locks made most recently are listed."; !strings.Contains(text(doc), want) {
		t.Errorf("a cut list does not say %q: %s", want, text(doc))
	}
}

func TestDashboardEventsPager(t *testing.T) {
	for _, tc := range []struct {
		name        string
		p           EventsProps
		wantLinks   string
		wantLiveTag bool
	}{
		{"first page", EventsProps{Rows: []EventRow{{At: dashNow, What: "x"}}, OlderHref: "/admin?before=9"}, "[Older events]", true},
		{"middle page", EventsProps{Rows: []EventRow{{At: dashNow, What: "x"}}, OlderHref: "/admin?before=5", NewestHref: "/admin"}, "[Newest events Older events]", false},
		{"last page", EventsProps{Rows: []EventRow{{At: dashNow, What: "x"}}, NewestHref: "/admin"}, "[Newest events]", false},
		{"only page", EventsProps{Rows: []EventRow{{At: dashNow, What: "x"}}}, "[]", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := busyDashboard()
			p.Events = tc.p
			_, doc := render(t, DashboardPage(p))
			var links []string
			for _, nav := range elements(doc, "nav") {
				if l, _ := attr(nav, "aria-label"); l == "Security events pages" {
					for _, a := range elements(nav, "a") {
						links = append(links, text(a))
					}
				}
			}
			if fmt.Sprint(links) != tc.wantLinks {
				t.Errorf("pager links %v, want %s", links, tc.wantLinks)
			}
			live := false
			for d := range doc.Descendants() {
				if v, _ := attr(d, "data-live"); v == "events" {
					live = true
				}
			}
			if live != tc.wantLiveTag {
				t.Errorf("events region live = %v, want %v (only the newest page updates itself)", live, tc.wantLiveTag)
			}
		})
	}
}

func TestDashboardFormatting(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{countText(0), "0"},
		{countText(999), "999"},
		{countText(1000), "1,000"},
		{countText(1234567), "1,234,567"},
		{compactCount(500), "500"},
		{compactCount(2500), "2.5k"},
		{compactCount(40000), "40k"},
		{compactCount(2_000_000), "2M"},
		{percentOf(0, 0), ""},
		{percentOf(1, 1000), "Under 1% of attempts"},
		{percentOf(1, 3), "33% of attempts"},
		{untilText(dashNow.Add(30*time.Second), dashNow), "in 30 s"},
		{untilText(dashNow.Add(-time.Second), dashNow), "ended"},
		{untilText(dashNow.Add(25*time.Hour), dashNow), "in 25 h 0 min"},
		{fmt.Sprint(niceStep(0), niceStep(3), niceStep(7), niceStep(11), niceStep(625)), "1 5 10 20 1000"},
		{num(10.9333), "10.9"},
		{barWidth(1, 1000), "2"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
