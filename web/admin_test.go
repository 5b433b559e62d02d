package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/web"
)

const (
	adminEmail  = "root@example.com"
	memberEmail = "eve@example.com"
	anyPassword = "a password for tests"
)

// signIn signs c in over the JSON API.
func signIn(t *testing.T, c *http.Client, base, email, password string) {
	t.Helper()
	if resp, body := post(t, c, base+"/api/v1/login", jsonType, loginJSON(email, password)); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in as %s: %d %s", email, resp.StatusCode, body)
	}
}

// stats is the body of GET /api/v1/admin/stats.
type stats struct {
	Period         string           `json:"period"`
	From           time.Time        `json:"from"`
	To             time.Time        `json:"to"`
	Attempts       int64            `json:"attempts"`
	Successes      int64            `json:"successes"`
	Failures       int64            `json:"failures"`
	Invalid        int64            `json:"invalid"`
	Rejected       int64            `json:"rejected"`
	RejectedByRule map[string]int64 `json:"rejected_by_rule"`
	Lockouts       int64            `json:"lockouts"`
	ActiveLockouts int              `json:"active_lockouts"`
	ResetRequests  int64            `json:"reset_requests"`
	TopSources     []struct {
		Source   string `json:"source"`
		Rejected int64  `json:"rejected"`
	} `json:"top_sources"`
	TopAccounts []struct {
		Account          string `json:"account"`
		FailedOrRejected int64  `json:"failed_or_rejected"`
	} `json:"top_accounts"`
	PerMinute []struct {
		Start    time.Time `json:"start"`
		Attempts int64     `json:"attempts"`
		Rejected int64     `json:"rejected"`
	} `json:"per_minute"`
}

// getStats fetches the stats JSON of a period as c, returning the body too.
func getStats(t *testing.T, c *http.Client, base, period string) (stats, string) {
	t.Helper()
	resp, body := get(t, c, base+"/api/v1/admin/stats?period="+period)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("stats %s: %d %s %s", period, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var s stats
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("stats %s: %v in %s", period, err, body)
	}
	return s, body
}

// pageFigures reads the figures an HTML fragment shows: data-counter and
// data-rule elements, by key, as their text.
func pageFigures(t *testing.T, fragment string) map[string]string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(fragment))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for n := range doc.Descendants() {
		for _, a := range n.Attr {
			if a.Key == "data-counter" || a.Key == "data-rule" {
				var b strings.Builder
				for d := range n.Descendants() {
					if d.Type == html.TextNode {
						b.WriteString(d.Data)
					}
				}
				out[a.Val] = strings.TrimSpace(b.String())
			}
		}
	}
	return out
}

func TestDashboardAccess(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	env.AddUser(t, memberEmail, anyPassword, false)
	visitor := xcloaktest.Client(t, "127.0.30.1")
	member := xcloaktest.Client(t, "127.0.30.2")
	signIn(t, member, base, memberEmail, anyPassword)
	admin := xcloaktest.Client(t, "127.0.30.3")
	signIn(t, admin, base, adminEmail, anyPassword)

	unlock := url.Values{"email": {memberEmail}}.Encode()
	for _, tc := range []struct {
		name     string
		c        *http.Client
		method   string
		path     string
		status   int
		location string // for redirects
		body     string // a part the body must hold
	}{
		{"visitor page", visitor, "GET", "/admin", 303, "/login", ""},
		{"visitor stream", visitor, "GET", "/admin/stream", 303, "/login", ""},
		{"visitor unlock", visitor, "POST", "/admin/lockouts/unlock", 303, "/login", ""},
		{"visitor API", visitor, "GET", "/api/v1/admin/stats?period=5m", 401, "", `"error":"unauthenticated"`},
		{"member page", member, "GET", "/admin", 403, "", "administrators only"},
		{"member stream", member, "GET", "/admin/stream", 403, "", ""},
		{"member unlock", member, "POST", "/admin/lockouts/unlock", 403, "", ""},
		{"member API", member, "GET", "/api/v1/admin/stats?period=5m", 403, "", `"error":"forbidden"`},
		{"admin page", admin, "GET", "/admin", 200, "", "<h1>Security dashboard</h1>"},
		{"admin API", admin, "GET", "/api/v1/admin/stats", 200, "", `"period":"5m"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var form io.Reader
			if tc.method == "POST" {
				form = strings.NewReader(unlock)
			}
			req, err := http.NewRequestWithContext(t.Context(), tc.method, base+tc.path, form)
			if err != nil {
				t.Fatal(err)
			}
			if tc.method == "POST" {
				req.Header.Set("Content-Type", formType)
				req.Header.Set("Sec-Fetch-Site", "same-origin")
			}
			resp, body := do(t, tc.c, req)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tc.status, body)
			}
			if got := resp.Header.Get("Location"); got != tc.location {
				t.Errorf("Location %q, want %q", got, tc.location)
			}
			if !strings.Contains(body, tc.body) {
				t.Errorf("body does not hold %q: %s", tc.body, body)
			}
			if got := resp.Header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", got)
			}
		})
	}
}

// TestAdminRoutesRefuseOtherSites: an administrator's browser asked by
// another site's page, or a sibling host's (same-site: the session cookie
// is SameSite=Lax), to fetch an administrators' route, as an image, a
// script's fetch or a frame, is refused 403 before anything runs: no
// export, no event, no stream. XCloak's own pages, a link followed from
// anywhere, and clients that are no browser pass.
func TestAdminRoutesRefuseOtherSites(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.30.9")
	signIn(t, admin, base, adminEmail, anyPassword)
	fetch := func(path string, meta ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(meta); i += 2 {
			req.Header.Set(meta[i], meta[i+1])
		}
		return do(t, admin, req)
	}
	for _, path := range []string{"/admin/events.csv", "/admin/stream", "/admin", "/api/v1/admin/stats?period=5m"} {
		for _, meta := range [][]string{
			{"Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "image"},
			{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty"},
			{"Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "iframe"},
		} {
			if resp, body := fetch(path, meta...); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "XCloak itself") && !strings.Contains(body, `"cross_site"`) {
				t.Errorf("%s fetched with %v: %d, want 403", path, meta, resp.StatusCode)
			}
		}
	}
	// Another site's script sends the browser to the export, the stream
	// or the API as a navigation (location.href, window.open): no link
	// leads there from elsewhere, and none is followed.
	for _, path := range []string{"/admin/events.csv", "/admin/stream", "/api/v1/admin/stats?period=5m"} {
		for _, meta := range [][]string{
			{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"},
			{"Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document", "Sec-Fetch-User", "?1"},
		} {
			resp, body := fetch(path, meta...)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "XCloak itself") && !strings.Contains(body, `"cross_site"`) {
				t.Errorf("%s fetched with %v: %d, want 403", path, meta, resp.StatusCode)
			}
			// Nor does its refusal link there: a click on XCloak's own
			// page would be this site's navigation, and run it.
			if strings.Contains(body, "Continue to this page") {
				t.Errorf("%s refused with %v links to itself, for a click to run it", path, meta)
			}
		}
	}
	env.Flush(t)
	var exports int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM security_events WHERE kind = $1`, auth.EventEventsExported).Scan(&exports); err != nil {
		t.Fatal(err)
	}
	if exports != 0 {
		t.Errorf("%d exports recorded from other sites' fetches, want none", exports)
	}
	for _, meta := range [][]string{
		nil,
		{"Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty"},
		{"Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"},
		{"Sec-Fetch-Site", "none", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"},
	} {
		if resp, _ := fetch("/admin/events.csv", meta...); resp.StatusCode != http.StatusOK {
			t.Errorf("the export with %v: %d, want 200", meta, resp.StatusCode)
		}
	}
	// A link from another site opens a page.
	for _, path := range []string{"/admin", "/admin/events", "/admin/users"} {
		if resp, _ := fetch(path, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document", "Sec-Fetch-User", "?1"); resp.StatusCode != http.StatusOK {
			t.Errorf("%s opened by a link from another site: %d, want 200", path, resp.StatusCode)
		}
	}
}

// TestAdminNoticesOnlyAfterOwnActs: the notice an administrators' page
// shows after an act ("The account's second factors were removed",
// "Attack mode is off") comes from the redirect of XCloak's own form. A
// link from another site, which may open these pages, carries the same
// ?notice= and shows nothing, and so does one opened from a program
// outside the browser (a mail program's: Sec-Fetch-Site none): no page
// elsewhere makes an administrator believe an act was done that nobody
// did.
func TestAdminNoticesOnlyAfterOwnActs(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	root := env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.30.10")
	signIn(t, admin, base, adminEmail, anyPassword)
	for _, tc := range []struct{ path, words string }{
		{"/admin?notice=attack-off", "Attack mode is off."},
		{"/admin?notice=signed-out", "The account was signed out everywhere"},
		{"/admin/users?notice=deleted", "The account was deleted."},
		{fmt.Sprintf("/admin/users/%d?notice=factors-removed", root.ID), "second factors and recovery codes were removed"},
	} {
		for _, site := range []string{"cross-site", "same-site", "none"} {
			resp, body := get(t, admin, base+tc.path, "Sec-Fetch-Site", site, "Sec-Fetch-Mode", "navigate",
				"Sec-Fetch-Dest", "document", "Sec-Fetch-User", "?1")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s from a %s link: %d, want 200", tc.path, site, resp.StatusCode)
			}
			if strings.Contains(body, tc.words) {
				t.Errorf("%s from a %s link shows %q", tc.path, site, tc.words)
			}
		}
		resp, body := get(t, admin, base+tc.path, "Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, tc.words) {
			t.Errorf("%s after XCloak's own form: %d, without %q", tc.path, resp.StatusCode, tc.words)
		}
	}
}

// TestNoticesNotCarriedByContinueLink: a page another site's script
// opened is refused with a link to the page for the user to click, which
// is then XCloak's own navigation; that link leaves out the notices of
// the URL the other site chose, or a click would have the page confirm
// an act nobody did ("Attack mode is off", "Every other session was
// ended"). Its other parameters, an event search's filters, stay.
func TestNoticesNotCarriedByContinueLink(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	root := env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.30.11")
	signIn(t, admin, base, adminEmail, anyPassword)
	scripted := []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"}
	for _, tc := range []struct{ path, want string }{
		{"/admin?notice=attack-off&period=1h", "/admin?period=1h"},
		{"/admin/users?notice=deleted", "/admin/users"},
		{fmt.Sprintf("/admin/users/%d?notice=factors-removed", root.ID), fmt.Sprintf("/admin/users/%d", root.ID)},
		{"/admin/events?account=ann%40example.com&notice=deleted", "/admin/events?account=ann%40example.com"},
		{"/account?sessions=ended", "/account"},
		{"/account?password=changed&session=ended&device=forgotten", "/account"},
		{"/account/mfa?factor=removed", "/account/mfa"},
	} {
		resp, body := get(t, admin, base+tc.path, scripted...)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s as another site's script's navigation: %d, want 403", tc.path, resp.StatusCode)
		}
		want := `href="` + html.EscapeString(tc.want) + `" rel="noreferrer">Continue to this page`
		if !strings.Contains(body, want) {
			i := strings.Index(body, "Continue to this page")
			t.Errorf("%s: the link to go on is not to %s: %.200s", tc.path, tc.want, body[max(0, i-150):max(0, i)])
		}
	}
}

func TestDashboardBadInput(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.31.1")
	signIn(t, admin, base, adminEmail, anyPassword)
	for _, tc := range []struct {
		path string
		want string
	}{
		{"/admin?period=7d", "Choose a period"},
		{"/admin?period=", "Choose a period"},
		{"/admin?period=5m&period=1h", "Choose a period"},
		{"/admin?before=abc", "does not exist"},
		{"/admin?before=0", "does not exist"},
		{"/admin?before=-4", "does not exist"},
		{"/admin/stream?period=1d", "Choose a period"},
		{"/api/v1/admin/stats?period=2h", `"error":"invalid_period"`},
		{"/api/v1/admin/stats?period=5M", `"error":"invalid_period"`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, body := get(t, admin, base+tc.path)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %s; want 400 with %q", resp.StatusCode, body, tc.want)
			}
		})
	}
	for _, form := range []url.Values{
		{"email": {"not an address"}},
		{"email": {"ann@example.com"}, "period": {"1w"}},
		{"email": {"ann@example.com", "bob@example.com"}},
	} {
		resp, body := post(t, admin, base+"/admin/lockouts/unlock", formType, form.Encode(), "Sec-Fetch-Site", "same-origin")
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("unlock %v: %d %s; want 400", form, resp.StatusCode, body)
		}
	}
}

// TestDashboardCountsTraffic sends a known mix of sign-ins and resets and
// checks that the stats JSON and the page count exactly that: N sign-in
// attempts of which M were rejected, by rule.
func TestDashboardCountsTraffic(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.Limits.SetCount(auth.RuleLoginIP, 5)
		c.Limits.SetCount(auth.RuleLoginAccount, 4)
		c.Lockout.Threshold = 3
		c.Limits.SetCount(auth.RuleResetIP, 2)
	}})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	env.AddUser(t, "victim@example.com", anyPassword, false)
	env.AddUser(t, "busy@example.com", anyPassword, false)

	statuses := map[int]int{}
	sent := 0
	send := func(source, email, password string) int {
		resp, _ := post(t, xcloaktest.Client(t, source), base+"/api/v1/login", jsonType, loginJSON(email, password))
		statuses[resp.StatusCode]++
		sent++
		return resp.StatusCode
	}

	admin := xcloaktest.Client(t, "127.0.20.1")
	signIn(t, admin, base, adminEmail, anyPassword) // 1 success
	statuses[200]++
	sent++

	// 8 at once from one address: 5 pass the per-address limit and fail,
	// 3 are rejected by it.
	burst := burstHTTP(t, base, 8, func(i int) (string, string) { return "127.0.20.2", fmt.Sprintf("u%d@example.com", i) })
	if burst[401] != 5 || burst[429] != 3 {
		t.Fatalf("burst answers %v; want 5 x 401 and 3 x 429", burst)
	}
	for code, n := range burst {
		statuses[code] += n
	}
	sent += 8

	// 6 wrong passwords for one account from 6 addresses: 3 failures lock
	// it, 3 are rejected by the lockout.
	for i := range 6 {
		want := map[bool]int{true: 401, false: 429}[i < 3]
		if got := send(fmt.Sprintf("127.0.20.%d", 10+i), "victim@example.com", fmt.Sprint("wrong ", i)); got != want {
			t.Fatalf("victim attempt %d: %d, want %d", i, got, want)
		}
	}
	// 6 right passwords for one account from 6 new browsers: 4 succeed,
	// 2 are rejected by the per-account limit.
	for i := range 6 {
		want := map[bool]int{true: 200, false: 429}[i < 4]
		if got := send(fmt.Sprintf("127.0.20.%d", 30+i), "busy@example.com", anyPassword); got != want {
			t.Fatalf("busy attempt %d: %d, want %d", i, got, want)
		}
	}
	// One malformed sign-in.
	if got := send("127.0.20.50", "not-an-address", "x"); got != 400 {
		t.Fatalf("malformed sign-in: %d", got)
	}
	// 4 reset requests from one address: 2 accepted, 2 rejected. They are
	// not sign-in attempts.
	resets := xcloaktest.Client(t, "127.0.20.40")
	for i := range 4 {
		want := map[bool]int{true: 202, false: 429}[i < 2]
		if resp, _ := post(t, resets, base+"/api/v1/password-reset", jsonType, fmt.Sprintf(`{"email":"r%d@example.com"}`, i)); resp.StatusCode != want {
			t.Fatalf("reset %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	env.Flush(t)

	n, m := int64(sent), int64(statuses[429])
	if n != 22 || m != 8 {
		t.Fatalf("sent %d sign-ins, %d rejected (%v); the plan was 22 and 8", n, m, statuses)
	}
	// Every rule the dashboard lists is there, at zero unless it refused
	// requests here.
	wantRules := map[string]int64{}
	for _, r := range auth.RejectionRules() {
		wantRules[r] = 0
	}
	maps.Copy(wantRules, map[string]int64{
		auth.RuleLoginIP: 3, auth.RuleLoginAccount: 2, auth.RuleLoginDevice: 0, auth.RuleLockout: 3,
		auth.RuleResetIP: 2, auth.RuleResetAccount: 0, auth.RuleResetConfirmIP: 0,
	})
	for _, period := range []string{"5m", "1h", "24h"} {
		t.Run(period, func(t *testing.T) {
			s, _ := getStats(t, admin, base, period)
			type headline struct{ Attempts, Successes, Failures, Invalid, Rejected, Lockouts, Resets int64 }
			got := headline{s.Attempts, s.Successes, s.Failures, s.Invalid, s.Rejected, s.Lockouts, s.ResetRequests}
			want := headline{n, int64(statuses[200]), int64(statuses[401]), int64(statuses[400]), m, 1, 2}
			if got != want {
				t.Errorf("stats %+v\nwant  %+v", got, want)
			}
			if fmt.Sprint(s.RejectedByRule) != fmt.Sprint(wantRules) {
				t.Errorf("rejected_by_rule %v, want %v", s.RejectedByRule, wantRules)
			}
			if s.ActiveLockouts != 1 {
				t.Errorf("active_lockouts %d, want 1", s.ActiveLockouts)
			}
			if len(s.TopSources) == 0 || s.TopSources[0].Source != "127.0.20.2" || s.TopSources[0].Rejected != 3 {
				t.Errorf("top source %+v, want 127.0.20.2 with 3", s.TopSources)
			}
			if len(s.TopAccounts) < 2 || s.TopAccounts[0].Account != "victim@example.com" || s.TopAccounts[0].FailedOrRejected != 6 ||
				s.TopAccounts[1].Account != "busy@example.com" || s.TopAccounts[1].FailedOrRejected != 2 {
				t.Errorf("top accounts %+v, want victim (6) then busy (2)", s.TopAccounts)
			}
			var chartAttempts, chartRejected int64
			for _, pm := range s.PerMinute {
				chartAttempts += pm.Attempts
				chartRejected += pm.Rejected
			}
			if len(s.PerMinute) != dashboard.SeriesMinutes || chartAttempts != n || chartRejected != m {
				t.Errorf("per_minute: %d minutes summing to %d attempts, %d rejected; want %d, %d, %d", len(s.PerMinute), chartAttempts, chartRejected, dashboard.SeriesMinutes, n, m)
			}

			resp, page := get(t, admin, base+"/admin?period="+period)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("page: %d", resp.StatusCode)
			}
			figures := pageFigures(t, page)
			for key, want := range map[string]int64{
				"attempts": n, "rejected": m, "successes": s.Successes, "failures": s.Failures, "invalid": s.Invalid,
				"active_lockouts": 1, "lockouts": 1, "reset_requests": 2,
			} {
				if figures[key] != fmt.Sprint(want) {
					t.Errorf("page shows %s = %q, want %d", key, figures[key], want)
				}
			}
			for rule, want := range wantRules {
				if figures[rule] != fmt.Sprint(want) {
					t.Errorf("page shows rule %s = %q, want %d", rule, figures[rule], want)
				}
			}
			if !strings.Contains(page, `value="victim@example.com"`) {
				t.Error("the locked account has no row with an unlock form")
			}
		})
	}
}

// TestDashboardReplicasAgree runs two XCloaks on the same Redis and
// Postgres, sends traffic to both, and gets the same figures from each.
func TestDashboardReplicasAgree(t *testing.T) {
	limits := func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginIP, 5); c.Lockout.Threshold = 100 }
	one := xcloaktest.New(t, xcloaktest.Options{Auth: limits})
	two := xcloaktest.New(t, xcloaktest.Options{Auth: limits, DatabaseURL: one.DatabaseURL, Redis: one.Redis, Prefix: one.Prefix})
	bases := []string{one.Start(t), two.Start(t)}
	one.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.21.1")
	signIn(t, admin, bases[0], adminEmail, anyPassword)

	// One address, ten attempts, half on each replica: the limit is shared,
	// so exactly five are rejected in all.
	attacker := xcloaktest.Client(t, "127.0.21.2")
	rejected := 0
	for i := range 10 {
		resp, _ := post(t, attacker, bases[i%2]+"/api/v1/login", jsonType, loginJSON(fmt.Sprintf("u%d@example.com", i), "guess"))
		if resp.StatusCode == http.StatusTooManyRequests {
			rejected++
		}
	}
	if rejected != 5 {
		t.Fatalf("%d rejected across replicas, want 5", rejected)
	}
	one.Flush(t)
	two.Flush(t)

	for _, period := range []string{"5m", "1h", "24h"} {
		var bodies [2]string
		var got [2]stats
		// Asked in different minutes, the windows differ; ask again.
		for range 3 {
			for i, base := range bases {
				got[i], bodies[i] = getStats(t, admin, base, period)
			}
			if got[0].To.Equal(got[1].To) {
				break
			}
		}
		if bodies[0] != bodies[1] {
			t.Errorf("%s: replicas disagree:\n%s\n%s", period, bodies[0], bodies[1])
		}
		if got[0].Attempts != 11 || got[0].Rejected != 5 || got[0].RejectedByRule[auth.RuleLoginIP] != 5 {
			t.Errorf("%s: %d attempts, %d rejected; want 11 and 5", period, got[0].Attempts, got[0].Rejected)
		}
	}
}

func TestUnlock(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Lockout.Threshold = 3 }})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	env.AddUser(t, memberEmail, anyPassword, false)
	env.AddUser(t, "victim@example.com", anyPassword, false)
	attacker := xcloaktest.Client(t, "127.0.22.1")
	for i := range 3 {
		post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("victim@example.com", fmt.Sprint("guess ", i)))
	}
	if resp, _ := post(t, xcloaktest.Client(t, "127.0.22.2"), base+"/api/v1/login", jsonType, loginJSON("victim@example.com", anyPassword)); resp.StatusCode != 429 {
		t.Fatalf("the victim is not locked: %d", resp.StatusCode)
	}
	admin := xcloaktest.Client(t, "127.0.22.3")
	signIn(t, admin, base, adminEmail, anyPassword)
	member := xcloaktest.Client(t, "127.0.22.4")
	signIn(t, member, base, memberEmail, anyPassword)
	form := url.Values{"email": {"victim@example.com"}, "period": {"1h"}}.Encode()
	stillLocked := func(t *testing.T) {
		t.Helper()
		if s, _ := getStats(t, admin, base, "5m"); s.ActiveLockouts != 1 {
			t.Errorf("active lockouts %d, want 1", s.ActiveLockouts)
		}
		if _, page := get(t, admin, base+"/admin"); !strings.Contains(page, `value="victim@example.com"`) {
			t.Error("the lockout's row is gone")
		}
	}

	for _, tc := range []struct {
		name   string
		c      *http.Client
		header []string
	}{
		{"cross-site", admin, []string{"Sec-Fetch-Site", "cross-site"}},
		{"foreign origin", admin, []string{"Origin", "https://evil.example"}},
		{"member", member, []string{"Sec-Fetch-Site", "same-origin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if resp, body := post(t, tc.c, base+"/admin/lockouts/unlock", formType, form, tc.header...); resp.StatusCode != http.StatusForbidden {
				t.Fatalf("%d %s; want 403", resp.StatusCode, body)
			}
			stillLocked(t)
		})
	}

	resp, _ := post(t, admin, base+"/admin/lockouts/unlock", formType, form, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin?notice=unlocked&period=1h" {
		t.Fatalf("unlock: %d to %q; want 303 to the dashboard", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, page := get(t, admin, base+resp.Header.Get("Location")); strings.Contains(page, `value="victim@example.com"`) || !strings.Contains(page, "The lockout was lifted.") {
		t.Error("after the unlock the page still lists the lockout or does not say it was lifted")
	}
	if resp, _ := post(t, xcloaktest.Client(t, "127.0.22.5"), base+"/api/v1/login", jsonType, loginJSON("victim@example.com", anyPassword)); resp.StatusCode != 200 {
		t.Fatalf("the victim's sign-in after the unlock: %d", resp.StatusCode)
	}
	env.Flush(t)
	events, err := env.Dashboard.Events(t.Context(), dashboard.EventFilter{Kinds: []string{auth.EventUnlock}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Account != "victim@example.com" || events[0].Detail["by"] != "admin:"+adminEmail {
		t.Fatalf("unlock events %+v; want one for the victim by admin:%s", events, adminEmail)
	}
	if _, page := get(t, admin, base+"/admin"); !strings.Contains(page, "By administrator "+adminEmail) {
		t.Error("the events table does not show who lifted the lockout")
	}

	resp, _ = post(t, admin, base+"/admin/lockouts/unlock", formType, form, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin?notice=not-locked&period=1h" {
		t.Fatalf("second unlock: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// sseEvent is one Server-Sent Event.
type sseEvent struct{ name, data string }

// openStream connects to the dashboard stream as c and returns its events
// as they arrive; the stream closes when the test ends.
func openStream(t *testing.T, c *http.Client, url string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	events := make(chan sseEvent, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var e sseEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.name != "" {
					e.data = strings.Join(data, "\n")
					select {
					case events <- e:
					case <-ctx.Done():
						return
					}
				}
				e, data = sseEvent{}, nil
			case strings.HasPrefix(line, "event: "):
				e.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	return events, resp
}

// awaitEvent reads events until one named name satisfies ok. The deadline
// only stops a broken stream from hanging the test; it is not what the
// awaitStreamReopens opens streams of url as c until one is let in,
// once a stream that held a place has been closed: the server notices a
// closed stream when its connection ends. Only 429s may come before; the
// deadline only keeps a broken server from hanging the test.
func awaitStreamReopens(t *testing.T, c *http.Client, url string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		events, resp := openStream(t, c, url)
		if resp.StatusCode == http.StatusOK {
			awaitEvent(t, events, "live", func(string) bool { return true })
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("a stream once another closed: %d, want 200 once the closed one is gone", resp.StatusCode)
		}
	}
}

// test measures.
func awaitEvent(t *testing.T, events <-chan sseEvent, name string, ok func(data string) bool) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e, open := <-events:
			if !open {
				t.Fatalf("stream ended before a %q event came", name)
			}
			if e.name == name && ok(e.data) {
				return e.data
			}
		case <-deadline:
			t.Fatalf("no matching %q event", name)
		}
	}
}

func TestDashboardStream(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Lockout.Threshold = 2 }})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.23.1")
	signIn(t, admin, base, adminEmail, anyPassword)
	env.Flush(t)

	first, resp := openStream(t, admin, base+"/admin/stream?period=5m")
	for header, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(header); got != want {
			t.Errorf("%s: %q, want %q", header, got, want)
		}
	}
	attempts := func(want string) func(string) bool {
		return func(data string) bool { return pageFigures(t, data)["attempts"] == want }
	}
	awaitEvent(t, first, "live", attempts("1"))
	awaitEvent(t, first, "lockouts", func(data string) bool { return strings.Contains(data, "No accounts are locked out.") })

	// A second stream shares the first one's reader and gets the same news.
	second, _ := openStream(t, admin, base+"/admin/stream?period=5m")
	awaitEvent(t, second, "live", attempts("1"))

	attacker := xcloaktest.Client(t, "127.0.23.2")
	for i := range 2 {
		post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("target@example.com", fmt.Sprint("guess ", i)))
	}
	env.Flush(t)
	for _, events := range []<-chan sseEvent{first, second} {
		awaitEvent(t, events, "live", attempts("3"))
		awaitEvent(t, events, "lockouts", func(data string) bool { return strings.Contains(data, `value="target@example.com"`) })
		awaitEvent(t, events, "events", func(data string) bool { return strings.Contains(data, "Account locked") })
	}

	// After one stream goes, the other still hears of new traffic, and a
	// new connection (a browser reconnecting) starts with the current
	// figures.
	resp.Body.Close()
	post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("other@example.com", "guess"))
	env.Flush(t)
	awaitEvent(t, second, "live", attempts("4"))
	again, _ := openStream(t, admin, base+"/admin/stream?period=5m")
	awaitEvent(t, again, "live", attempts("4"))
}

// TestStreamEndsWithItsSession: an open dashboard stops showing live
// figures, lockouts and events once its session no longer lets it: after
// a sign-out, or after its administrator is demoted, within the stream's
// recheck, where it once ran on for half a minute.
func TestStreamEndsWithItsSession(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	other := env.AddUser(t, "second-admin@example.com", anyPassword, true)
	for _, c := range []struct {
		name  string
		email string
		end   func(c *http.Client)
	}{
		{"signed out", adminEmail, func(c *http.Client) {
			if resp, _ := post(t, c, base+"/logout", formType, ""); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("sign-out: %d", resp.StatusCode)
			}
		}},
		{"demoted", other.Email, func(*http.Client) {
			if _, err := env.Service.DemoteUser(t.Context(), other.ID, "test"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			admin := xcloaktest.Client(t, "127.0.25.2")
			signIn(t, admin, base, c.email, anyPassword)
			events, _ := openStream(t, admin, base+"/admin/stream")
			awaitEvent(t, events, "live", func(string) bool { return true })
			c.end(admin)
			ended := time.After(10 * time.Second) // a third of the recheck it had
			for {
				select {
				case _, open := <-events:
					if !open {
						return
					}
				case <-ended:
					t.Fatal("the stream still runs 10 s after its session ended")
				}
			}
		})
	}
}

// TestStreamEndsAtShutdown: an open dashboard does not hold up a
// graceful shutdown; its stream ends when the server starts shutting down.
func TestStreamEndsAtShutdown(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	srv := httptest.NewServer(env.Handler)
	t.Cleanup(srv.Close)
	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.25.1")
	signIn(t, admin, srv.URL, adminEmail, anyPassword)
	// A client that never gives up on a response by itself.
	patient := *admin
	patient.Timeout = 0
	events, _ := openStream(t, &patient, srv.URL+"/admin/stream")
	awaitEvent(t, events, "live", func(string) bool { return true })

	// Far less than the stream's own lifetime: only the shutdown can end it.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := srv.Config.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v; an open stream held it up", err)
	}
	for range events {
	}
}

// TestDashboardEventsPages lists more events than fit a page and follows
// the "Older events" link to the end: 25 accounts made (an administrator's
// act, listed) and 25 first sign-ins from a new device, each listed once.
func TestDashboardEventsPages(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.24.1")
	signIn(t, admin, base, adminEmail, anyPassword) // a new device too
	for i := range 24 {
		email := fmt.Sprintf("user%02d@example.com", i)
		env.AddUser(t, email, anyPassword, false)
		if _, err := env.Service.Login(t.Context(), auth.LoginRequest{Email: email, Password: anyPassword}); err != nil {
			t.Fatal(err)
		}
	}
	env.Flush(t)

	seen := map[string]bool{}
	path := "/admin?period=1h"
	var pages []int
	for path != "" && len(pages) < 5 {
		resp, page := get(t, admin, base+path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		doc, err := html.Parse(strings.NewReader(page))
		if err != nil {
			t.Fatal(err)
		}
		rows, next := 0, ""
		for n := range doc.Descendants() {
			if n.Type != html.ElementNode {
				continue
			}
			// A row's words differ from every other event's: the
			// account and what happened to it.
			if n.Data == "tr" && strings.Contains(textOf(n), "@example.com") {
				rows++
				if seen[textOf(n)] {
					t.Errorf("%s listed twice", textOf(n))
				}
				seen[textOf(n)] = true
			}
			if n.Data == "a" && textOf(n) == "Older events" {
				for _, a := range n.Attr {
					if a.Key == "href" {
						next = a.Val
					}
				}
			}
		}
		pages = append(pages, rows)
		path = next
	}
	if fmt.Sprint(pages) != "[20 20 10]" || len(seen) != 50 {
		t.Fatalf("pages of %v rows, %d events; want [20 20 10] and all 50", pages, len(seen))
	}
}

func textOf(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.TrimSpace(b.String())
}

// TestStreamsCappedPerSession: one session holds at most four dashboard
// streams at once; the fifth is a 429 saying why, another session is not
// affected, and closing a stream makes room again.
func TestStreamsCappedPerSession(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.26.1")
	signIn(t, admin, base, adminEmail, anyPassword)

	var first *http.Response
	for i := range 4 {
		events, resp := openStream(t, admin, base+"/admin/stream?period=5m")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %d, want 200", i+1, resp.StatusCode)
		}
		awaitEvent(t, events, "live", func(string) bool { return true })
		if first == nil {
			first = resp
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/admin/stream?period=5m", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		resp.Body.Close()
		t.Fatal("fifth stream of one session opened, want 429")
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if body := string(b); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "Too many live dashboards are open") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("fifth stream: %d Retry-After %q, want 429 with Retry-After and the reason\n%s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}

	// Another session of the same administrator has its own four.
	other := xcloaktest.Client(t, "127.0.26.2")
	signIn(t, other, base, adminEmail, anyPassword)
	if _, resp := openStream(t, other, base+"/admin/stream?period=5m"); resp.StatusCode != http.StatusOK {
		t.Fatalf("another session's stream: %d, want 200", resp.StatusCode)
	}

	first.Body.Close()
	awaitStreamReopens(t, admin, base+"/admin/stream?period=5m")
}

// jsonKeys lists the keys of the JSON object raw in the order they appear.
func jsonKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", raw)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// TestStatsJSONShape pins every field of GET /api/v1/admin/stats, nested
// ones included, in order and with its JSON type: scripts and monitoring
// read it, so no field may be renamed, dropped or change its kind.
func TestStatsJSONShape(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginIP, 1) }})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.27.1")
	signIn(t, admin, base, adminEmail, anyPassword)
	attacker := xcloaktest.Client(t, "127.0.27.2")
	for range 2 {
		post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("target@example.com", "guess"))
	}
	env.Flush(t)

	_, body := getStats(t, admin, base, "1h")
	want := []string{"period", "from", "to", "attempts", "successes", "failures", "invalid", "unavailable",
		"degraded", "failure_policy", "counters_unavailable", "rejected", "rejected_by_rule", "lockouts",
		"active_lockouts", "reset_requests", "reset_mails_dropped", "webhooks_dropped", "top_sources", "top_accounts", "per_minute", "attack", "applications",
		"accounts", "accounts_with_factor"}
	if got := jsonKeys(t, []byte(body)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("keys %v\nwant %v", got, want)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{
		"period": "string", "from": "string", "to": "string", "attempts": "float64", "successes": "float64",
		"failures": "float64", "invalid": "float64", "unavailable": "float64", "degraded": "bool",
		"failure_policy": "string", "counters_unavailable": "bool", "rejected": "float64",
		"rejected_by_rule": "map[string]interface {}", "lockouts": "float64", "active_lockouts": "float64",
		"reset_requests": "float64", "reset_mails_dropped": "float64", "webhooks_dropped": "float64", "top_sources": "[]interface {}",
		"top_accounts": "[]interface {}", "per_minute": "[]interface {}", "attack": "map[string]interface {}",
		"applications": "[]interface {}", "accounts": "float64", "accounts_with_factor": "float64",
	}
	for key, kind := range kinds {
		if got := fmt.Sprintf("%T", doc[key]); got != kind {
			t.Errorf("%s is a %s, want %s", key, got, kind)
		}
	}
	if doc["period"] != "1h" || doc["failure_policy"] != "local" {
		t.Errorf("period %v, failure_policy %v; want 1h and local", doc["period"], doc["failure_policy"])
	}
	var nested struct {
		TopSources  []json.RawMessage `json:"top_sources"`
		TopAccounts []json.RawMessage `json:"top_accounts"`
		PerMinute   []json.RawMessage `json:"per_minute"`
	}
	if err := json.Unmarshal([]byte(body), &nested); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		items []json.RawMessage
		keys  string
	}{
		"top_sources":  {nested.TopSources, "[source rejected]"},
		"top_accounts": {nested.TopAccounts, "[account failed_or_rejected]"},
		"per_minute":   {nested.PerMinute, "[start attempts rejected]"},
	} {
		if len(tc.items) == 0 {
			t.Errorf("%s is empty; the traffic should fill it", name)
			continue
		}
		if got := fmt.Sprint(jsonKeys(t, tc.items[0])); got != tc.keys {
			t.Errorf("%s items have keys %s, want %s", name, got, tc.keys)
		}
	}
}

// TestStreamHeadHoldsNoPlace: HEAD of the live stream answers its headers
// and ends, as net/http sends it no body anyway: it holds none of the
// session's places for streams, which would otherwise stay taken until
// the client closed the connection.
func TestStreamHeadHoldsNoPlace(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.26.3")
	signIn(t, admin, base, adminEmail, anyPassword)
	for i := range web.MaxStreamsPerSession + 1 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodHead, base+"/admin/stream?period=5m", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := admin.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("HEAD %d: %d %q, want 200 text/event-stream", i+1, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	if _, resp := openStream(t, admin, base+"/admin/stream?period=5m"); resp.StatusCode != http.StatusOK {
		t.Fatalf("a stream after HEADs: %d, want 200", resp.StatusCode)
	}
}
