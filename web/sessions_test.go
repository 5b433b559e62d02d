package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/breached/breachedtest"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

const (
	firefoxLinux  = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
	chromeAndroid = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36"
)

// sessionsBody is the body of GET /api/v1/account/sessions.
type sessionsBody struct {
	Sessions []struct {
		ID         string    `json:"id"`
		CreatedAt  time.Time `json:"created_at"`
		LastSeenAt time.Time `json:"last_seen_at"`
		Network    string    `json:"network"`
		Browser    string    `json:"browser"`
		Current    bool      `json:"current"`
	} `json:"sessions"`
	Devices []struct {
		ID          string    `json:"id"`
		FirstSeenAt time.Time `json:"first_seen_at"`
		LastSeenAt  time.Time `json:"last_seen_at"`
	} `json:"devices"`
}

// browser is a cookie jar that sends a User-Agent.
type browser struct {
	c  *http.Client
	ua string
}

func newBrowser(t *testing.T, source, ua string) browser {
	return browser{xcloaktest.Client(t, source), ua}
}

func (b browser) send(t *testing.T, method, url, contentType, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", b.ua)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return do(t, b.c, req)
}

func (b browser) signIn(t *testing.T, base, email, password string) {
	t.Helper()
	if resp, body := b.send(t, http.MethodPost, base+"/api/v1/login", jsonType, loginJSON(email, password)); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in as %s: %d %s", email, resp.StatusCode, body)
	}
}

func (b browser) sessions(t *testing.T, base string) sessionsBody {
	t.Helper()
	resp, body := b.send(t, http.MethodGet, base+"/api/v1/account/sessions", "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/account/sessions: %d %s", resp.StatusCode, body)
	}
	var out sessionsBody
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("sessions body %q: %v", body, err)
	}
	return out
}

// TestSessionsListedAndEnded: an account's two browsers are both listed
// with their network and browser, the asking one marked; ending the other
// signs it out; another account's session, an unknown id and a malformed
// one are the same 404 and end nothing.
func TestSessionsListedAndEnded(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "ann password", false)
	env.AddUser(t, "bob@example.com", "bob password", false)
	laptop, phone := newBrowser(t, "127.0.13.1", firefoxLinux), newBrowser(t, "127.0.13.2", chromeAndroid)
	bob := newBrowser(t, "127.0.13.3", firefoxLinux)
	laptop.signIn(t, base, "ann@example.com", "ann password")
	phone.signIn(t, base, "ann@example.com", "ann password")
	bob.signIn(t, base, "bob@example.com", "bob password")

	list := laptop.sessions(t, base)
	if len(list.Sessions) != 2 || len(list.Devices) != 2 {
		t.Fatalf("ann's list: %+v; want her two sessions and two devices", list)
	}
	var mine, other string
	for _, s := range list.Sessions {
		switch {
		case s.Current && s.Network == "127.0.13.1" && s.Browser == "Firefox on Linux":
			mine = s.ID
		case !s.Current && s.Network == "127.0.13.2" && s.Browser == "Chrome on Android":
			other = s.ID
		}
		if len(s.ID) != 32 || s.CreatedAt.IsZero() || s.LastSeenAt.IsZero() {
			t.Errorf("listed session %+v: want a 32-character id and its times", s)
		}
	}
	if mine == "" || other == "" {
		t.Fatalf("ann's sessions %+v: want the laptop's marked current and the phone's not, each with its network and browser", list.Sessions)
	}
	if resp, body := laptop.send(t, http.MethodGet, base+"/account", "", ""); resp.StatusCode != http.StatusOK ||
		!strings.Contains(body, "(this session)") || !strings.Contains(body, "Chrome on Android") || !strings.Contains(body, "/account/sessions/"+other+"/end") {
		t.Errorf("account page: %d, want both sessions listed, this one marked:\n%s", resp.StatusCode, body)
	}

	bobsID := bob.sessions(t, base).Sessions[0].ID
	for _, id := range []string{bobsID, strings.Repeat("0", 32), "not-an-id", strings.Repeat("z", 5000)} {
		resp, body := laptop.send(t, http.MethodDelete, base+"/api/v1/account/sessions/"+id, "", "")
		if resp.StatusCode != http.StatusNotFound || errorCode(t, body) != "not_found" {
			t.Errorf("DELETE session %.40s: %d %s, want 404 not_found", id, resp.StatusCode, body)
		}
	}
	if got := bob.sessions(t, base); len(got.Sessions) != 1 {
		t.Errorf("bob's sessions after ann tried to end his: %+v", got)
	}

	if resp, body := laptop.send(t, http.MethodDelete, base+"/api/v1/account/sessions/"+other, "", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("ending the phone's session: %d %s", resp.StatusCode, body)
	}
	if resp, body := phone.send(t, http.MethodGet, base+"/api/v1/account/sessions", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the phone after its session was ended: %d %s, want 401", resp.StatusCode, body)
	}
	if resp, _ := phone.send(t, http.MethodGet, base+"/account", "", ""); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("the phone's account page: %d to %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := laptop.sessions(t, base); len(got.Sessions) != 1 || got.Sessions[0].ID != mine {
		t.Errorf("ann's sessions after ending the phone's: %+v, want the laptop's alone", got.Sessions)
	}

	// Ending this session works too, and clears its cookie.
	resp, body := laptop.send(t, http.MethodDelete, base+"/api/v1/account/sessions/"+mine, "", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"current":true`) || !clearsSessionCookie(resp) {
		t.Errorf("ending this session: %d %s, cookies %v; want 200, current, the cookie cleared", resp.StatusCode, body, resp.Header.Values("Set-Cookie"))
	}
	if resp, _ := laptop.send(t, http.MethodGet, base+"/api/v1/account/sessions", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the laptop after ending its own session: %d, want 401", resp.StatusCode)
	}
}

func clearsSessionCookie(resp *http.Response) bool {
	for _, c := range resp.Cookies() {
		if strings.HasSuffix(c.Name, "xcloak_session") && c.MaxAge < 0 {
			return true
		}
	}
	return false
}

// TestEndOtherSessionsKeepsThisOne: "sign out everywhere else" from the
// account page ends every other session of the account and no other
// account's, and the browser that asked stays signed in.
func TestEndOtherSessionsKeepsThisOne(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "ann password", false)
	env.AddUser(t, "bob@example.com", "bob password", false)
	a1, a2, a3 := newBrowser(t, "127.0.14.1", firefoxLinux), newBrowser(t, "127.0.14.2", chromeAndroid), newBrowser(t, "127.0.14.3", "")
	bob := newBrowser(t, "127.0.14.4", firefoxLinux)
	for _, b := range []browser{a1, a2, a3} {
		b.signIn(t, base, "ann@example.com", "ann password")
	}
	bob.signIn(t, base, "bob@example.com", "bob password")

	resp, _ := a2.send(t, http.MethodPost, base+"/account/sessions/end-others", formType, "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account?sessions=ended" {
		t.Fatalf("end-others: %d to %q, want 303 to /account?sessions=ended", resp.StatusCode, resp.Header.Get("Location"))
	}
	for name, b := range map[string]browser{"first": a1, "third": a3} {
		if resp, _ := b.send(t, http.MethodGet, base+"/account", "", ""); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("ann's %s browser after end-others: %d, want 303 to /login", name, resp.StatusCode)
		}
	}
	if got := a2.sessions(t, base); len(got.Sessions) != 1 || !got.Sessions[0].Current {
		t.Errorf("ann's sessions after end-others: %+v, want this one alone", got.Sessions)
	}
	if got := bob.sessions(t, base); len(got.Sessions) != 1 {
		t.Errorf("bob's sessions after ann's end-others: %+v", got.Sessions)
	}

	// The form's end of one session, from a page, and a cross-site form.
	a1.signIn(t, base, "ann@example.com", "ann password")
	var other string
	for _, s := range a2.sessions(t, base).Sessions {
		if !s.Current {
			other = s.ID
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/account/sessions/"+other+"/end", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, _ := do(t, a2.c, req); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site end form: %d, want 403", resp.StatusCode)
	}
	resp, _ = a2.send(t, http.MethodPost, base+"/account/sessions/"+other+"/end", formType, "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account?session=ended" {
		t.Errorf("end form: %d to %q, want 303 to /account?session=ended", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := a1.send(t, http.MethodGet, base+"/account", "", ""); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the browser whose session was ended from the form: %d, want 303", resp.StatusCode)
	}

	// Both are owner's session_ended events, listed on the dashboard.
	env.Flush(t)
	events, err := env.Dashboard.Events(t.Context(), dashboard.EventFilter{Kinds: []string{auth.EventSessionEnded}, Limit: 10})
	if err != nil || len(events) != 2 {
		t.Fatalf("session_ended events: %+v (%v), want two", events, err)
	}
	for _, e := range events {
		if e.Account != "ann@example.com" || e.Detail["by"] != "owner" || e.Source != "127.0.14.2" {
			t.Errorf("event %+v: want ann's, by=owner, from 127.0.14.2", e)
		}
	}
	if events[0].Detail["scope"] != "one" || events[1].Detail["scope"] != "others" || events[1].Detail["count"] != "2" {
		t.Errorf("events' details %v, %v: want one, then others with count 2", events[0].Detail, events[1].Detail)
	}
	env.AddUser(t, "root@example.com", "root password", true)
	admin := newBrowser(t, "127.0.14.9", firefoxLinux)
	admin.signIn(t, base, "root@example.com", "root password")
	if _, body := admin.send(t, http.MethodGet, base+"/admin", "", ""); !strings.Contains(body, "Session ended by its owner") ||
		!strings.Contains(body, "Signed out everywhere else by its owner") || !strings.Contains(body, "2 sessions ended") {
		t.Errorf("dashboard: want both session_ended events listed:\n%s", body)
	}
}

// TestSessionLastSeenBounded: a session's last-seen time follows its use,
// but is written at most once a minute however many requests it serves.
func TestSessionLastSeenBounded(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	var offset atomic.Int64
	now := func() time.Time { return start.Add(time.Duration(offset.Load())) }
	env := xcloaktest.New(t, xcloaktest.Options{Now: now})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "ann password", false)
	b := newBrowser(t, "127.0.15.1", firefoxLinux)
	b.signIn(t, base, "ann@example.com", "ann password")

	for _, step := range []struct{ at, want time.Duration }{
		{0, 0},
		{30 * time.Second, 0},                // within a minute of sign-in: not written
		{61 * time.Second, 61 * time.Second}, // a minute on: written
		{90 * time.Second, 61 * time.Second}, // within a minute of that: not written
		{119 * time.Second, 61 * time.Second},
		{125 * time.Second, 125 * time.Second},
	} {
		offset.Store(int64(step.at))
		got := b.sessions(t, base).Sessions[0].LastSeenAt
		if !got.Equal(start.Add(step.want)) {
			t.Errorf("used at +%v: last seen +%v, want +%v", step.at, got.Sub(start), step.want)
		}
	}
}

// TestSessionsRoutesRefuseSignedOut: without a session the
// API answers 401 and the forms send to /login; the routes exist for
// signed-in owners only.
func TestSessionsRoutesRefuseSignedOut(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	b := newBrowser(t, "127.0.16.1", firefoxLinux)
	if resp, body := b.send(t, http.MethodGet, base+"/api/v1/account/sessions", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET sessions signed out: %d %s, want 401", resp.StatusCode, body)
	}
	if resp, body := b.send(t, http.MethodDelete, base+"/api/v1/account/sessions/"+strings.Repeat("a", 32), "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("DELETE session signed out: %d %s, want 401", resp.StatusCode, body)
	}
	for _, path := range []string{"/account/sessions/end-others", "/account/sessions/" + strings.Repeat("a", 32) + "/end"} {
		if resp, _ := b.send(t, http.MethodPost, base+path, formType, ""); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Errorf("POST %s signed out: %d to %q, want 303 to /login", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}

// TestSessionsRoutesRefuseRestricted: a session that must change its
// password (a known browser signed in with a breached password) cannot
// list or end sessions: the API answers 403, the forms send it to the
// change page, and nothing is ended.
func TestSessionsRoutesRefuseRestricted(t *testing.T) {
	corpus := breachedtest.New(t)
	env := withCorpus(t, corpus, nil)
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "password123", false)
	other := newBrowser(t, "127.0.16.2", chromeAndroid)
	other.signIn(t, base, "ann@example.com", "password123")
	otherID := other.sessions(t, base).Sessions[0].ID
	b := newBrowser(t, "127.0.16.3", firefoxLinux)
	b.signIn(t, base, "ann@example.com", "password123")
	corpus.Add(t, "password123")
	b.signIn(t, base, "ann@example.com", "password123")

	for _, req := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/account/sessions"},
		{http.MethodDelete, "/api/v1/account/sessions/" + otherID},
		{http.MethodGet, "/api/v1/account/activity"},
	} {
		if resp, body := b.send(t, req.method, base+req.path, "", ""); resp.StatusCode != http.StatusForbidden || errorCode(t, body) != "password_change_required" {
			t.Errorf("%s %s restricted: %d %s, want 403 password_change_required", req.method, req.path, resp.StatusCode, body)
		}
	}
	for _, path := range []string{"/account/sessions/end-others", "/account/sessions/" + otherID + "/end"} {
		if resp, _ := b.send(t, http.MethodPost, base+path, formType, ""); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account/password" {
			t.Errorf("POST %s restricted: %d to %q, want 303 to /account/password", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp, _ := other.send(t, http.MethodGet, base+"/api/v1/account/sessions", "", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("the other browser after the restricted session's tries: %d, want still signed in", resp.StatusCode)
	}
}

// TestSessionsRoutesLimited: the list and the ends count per account and
// network against account_ip, past which they answer 429 with Retry-After; the
// account page still shows, without the lists.
func TestSessionsRoutesLimited(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleAccountIP, 3) }})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "ann password", false)
	b := newBrowser(t, "127.0.16.4", firefoxLinux)
	b.signIn(t, base, "ann@example.com", "ann password")
	b.sessions(t, base)
	if resp, _ := b.send(t, http.MethodGet, base+"/account", "", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("account page: %d", resp.StatusCode)
	}
	if resp, body := b.send(t, http.MethodDelete, base+"/api/v1/account/sessions/"+strings.Repeat("0", 32), "", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("third request: %d %s, want 404", resp.StatusCode, body)
	}
	resp, body := b.send(t, http.MethodGet, base+"/api/v1/account/sessions", "", "")
	if resp.StatusCode != http.StatusTooManyRequests || errorCode(t, body) != "too_many_attempts" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("fourth request: %d %s, want 429 too_many_attempts with Retry-After", resp.StatusCode, body)
	}
	if resp, _ := b.send(t, http.MethodPost, base+"/account/sessions/end-others", formType, ""); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("end-others past the limit: %d, want 429", resp.StatusCode)
	}
	if resp, body := b.send(t, http.MethodGet, base+"/account", "", ""); resp.StatusCode != http.StatusOK ||
		!strings.Contains(body, "not shown") || strings.Contains(body, "(this session)") {
		t.Errorf("account page past the limit: %d, want 200 without the lists:\n%s", resp.StatusCode, body)
	}
}

// TestSessionsLimitIsTheAccounts: account_ip counts per account and
// network, so another account signed in behind the owner's address (a
// carrier's or an office's NAT) cannot spend it and keep the owner from
// ending a thief's session.
func TestSessionsLimitIsTheAccounts(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleAccountIP, 3) }})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "ann password", false)
	env.AddUser(t, "mallory@example.com", "mallory password", false)
	thief := newBrowser(t, "127.0.16.9", firefoxLinux)
	thief.signIn(t, base, "ann@example.com", "ann password")
	ann := newBrowser(t, "127.0.16.5", firefoxLinux)
	ann.signIn(t, base, "ann@example.com", "ann password")
	mallory := newBrowser(t, "127.0.16.5", firefoxLinux)
	mallory.signIn(t, base, "mallory@example.com", "mallory password")
	for {
		resp, _ := mallory.send(t, http.MethodGet, base+"/api/v1/account/sessions", "", "")
		if resp.StatusCode == http.StatusTooManyRequests {
			break
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("mallory's list: %d", resp.StatusCode)
		}
	}
	if resp, _ := ann.send(t, http.MethodPost, base+"/account/sessions/end-others", formType, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("ann's end-others after mallory's lists behind her address: %d, want 303", resp.StatusCode)
	}
	if resp, _ := thief.send(t, http.MethodGet, base+"/api/v1/account/sessions", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the thief's session after ann ended the others: %d, want 401", resp.StatusCode)
	}
}

// TestSessionsLimitNotSpentByOtherSites: account_ip is the owner's alone,
// so a page of another site, or of a sibling host (same-site, where the
// Lax session cookie goes with images and scripts' fetches), cannot spend
// it by having the owner's browser fetch the account's pages and lists
// and keep the owner from ending a thief's session. Those fetches are
// refused (403 cross_site) before they count; a link from elsewhere
// followed to the account page still opens it.
func TestSessionsLimitNotSpentByOtherSites(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleAccountIP, 3) }})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "ann password", false)
	thief := newBrowser(t, "127.0.16.19", firefoxLinux)
	thief.signIn(t, base, "ann@example.com", "ann password")
	ann := newBrowser(t, "127.0.16.15", firefoxLinux)
	ann.signIn(t, base, "ann@example.com", "ann password")
	fetch := func(path string, header ...string) *http.Response {
		t.Helper()
		resp, _ := get(t, ann.c, base+path, header...)
		return resp
	}
	for _, site := range []string{"same-site", "cross-site"} {
		for _, path := range []string{"/api/v1/account/sessions", "/account", "/api/v1/account/activity", "/account/activity"} {
			for range 4 {
				resp := fetch(path, "Sec-Fetch-Site", site, "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "image")
				if resp.StatusCode != http.StatusForbidden {
					t.Fatalf("GET %s as an image of a %s page: %d, want 403", path, site, resp.StatusCode)
				}
			}
		}
		if resp := fetch("/api/v1/account/sessions", "Sec-Fetch-Site", site, "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"); resp.StatusCode != http.StatusForbidden {
			t.Errorf("the sessions API navigated to from a %s page: %d, want 403", site, resp.StatusCode)
		}
	}
	if resp := fetch("/account", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document", "Sec-Fetch-User", "?1"); resp.StatusCode != http.StatusOK {
		t.Errorf("the account page by a link from another site: %d, want 200", resp.StatusCode)
	}
	endOthersEndsThief(t, base, ann, thief)
}

// endOthersEndsThief checks that ann, whose limits other sites' requests
// must not have spent, can still sign every other browser out, and that
// the thief's session has ended with it.
func endOthersEndsThief(t *testing.T, base string, ann, thief browser) {
	t.Helper()
	if resp, _ := ann.send(t, http.MethodPost, base+"/account/sessions/end-others", formType, ""); resp.StatusCode != http.StatusSeeOther ||
		resp.Header.Get("Location") != "/account?sessions=ended" {
		t.Fatalf("ann's end-others after other sites' requests: %d to %q, want 303 to /account?sessions=ended", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := thief.send(t, http.MethodGet, base+"/api/v1/account/sessions", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the thief's session after ann ended the others: %d, want 401", resp.StatusCode)
	}
}

// TestSessionCookieOutlastsItsIdleTime: a session's cookie lasts as long
// as the session can (XCLOAK_SESSION_TTL), not its first idle end, so that
// a browser in use is not signed out by its cookie; the server ends the
// session once it goes unused for XCLOAK_SESSION_IDLE.
func TestSessionCookieOutlastsItsIdleTime(t *testing.T) {
	var mu sync.Mutex
	t0 := time.Now().Truncate(time.Second)
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(d time.Duration) { mu.Lock(); now = t0.Add(d); mu.Unlock() }
	env := xcloaktest.New(t, xcloaktest.Options{Now: clock, Auth: func(c *auth.Config) {
		c.SessionTTL, c.SessionIdle = 2*time.Hour, 30*time.Minute
	}})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "ann password", false)
	b := newBrowser(t, "127.0.0.7", firefoxLinux)
	resp, body := b.send(t, http.MethodPost, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "ann password"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, body)
	}
	var expires time.Time
	for _, c := range resp.Cookies() {
		if strings.HasSuffix(c.Name, "xcloak_session") {
			expires = c.Expires
		}
	}
	if !expires.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("the session cookie expires %v, want %v: the session's end, not its idle end", expires, t0.Add(2*time.Hour))
	}
	for _, step := range []struct {
		at   time.Duration
		want int
	}{
		{20 * time.Minute, http.StatusOK},
		{50 * time.Minute, http.StatusOK},                          // 30 minutes after a use
		{50*time.Minute + 31*time.Minute, http.StatusUnauthorized}, // unused 31 minutes
	} {
		set(step.at)
		if resp, body := b.send(t, http.MethodGet, base+"/api/v1/account/sessions", "", ""); resp.StatusCode != step.want {
			t.Errorf("the account's sessions at +%v: %d %s, want %d", step.at, resp.StatusCode, body, step.want)
		}
	}
}

// TestLimitsNotSpentByOtherSitesScripts: a page of another site that
// opened a window may send it to XCloak's pages again and again, each a
// navigation of a document as a link's is, but made by its script, not
// by the user: the browser sends no Sec-Fetch-User. Such navigations are
// refused before they count, so that they spend neither the owner's
// account_ip (to keep them from ending a thief's session) nor the
// network's reset_confirm_ip (to keep the owner's mailed link from
// opening); a link the user follows still opens the page.
func TestLimitsNotSpentByOtherSitesScripts(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.Limits.SetCount(auth.RuleAccountIP, 3)
		c.Limits.SetCount(auth.RuleResetConfirmIP, 3)
	}})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "ann password", false)
	thief := newBrowser(t, "127.0.16.29", firefoxLinux)
	thief.signIn(t, base, "ann@example.com", "ann password")
	ann := newBrowser(t, "127.0.16.25", firefoxLinux)
	ann.signIn(t, base, "ann@example.com", "ann password")
	if resp, _ := post(t, xcloaktest.Client(t, "127.0.16.26"), base+"/password-reset", formType, "email=ann%40example.com"); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("reset request: %d", resp.StatusCode)
	}
	reset := resetLink.FindStringSubmatch(env.Mail.WaitFor(t, "ann@example.com").Body)
	if reset == nil {
		t.Fatal("no reset link in the mail")
	}
	scripted := []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"}
	followed := append(append([]string(nil), scripted...), "Sec-Fetch-User", "?1")
	for _, path := range []string{"/account", "/account/activity", "/password-reset/" + reset[1]} {
		for range 4 {
			resp, body := get(t, ann.c, base+path, scripted...)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("GET %s as another site's script's navigation: %d, want 403", path, resp.StatusCode)
			}
			// A link to the page itself, for the user to go on by a
			// click of their own (through a redirector that sends the
			// browser on by script, say).
			if !strings.Contains(body, `href="`+path+`" rel="noreferrer">Continue to this page`) {
				t.Errorf("GET %s refused as another site's script's navigation offers no link to itself", path)
			}
		}
	}
	image := []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "image"}
	if resp, body := get(t, ann.c, base+"/account", image...); resp.StatusCode != http.StatusForbidden || strings.Contains(body, "Continue to this page") {
		t.Errorf("/account as another site's image: %d, a link to go on %v; want 403 and none", resp.StatusCode, strings.Contains(body, "Continue"))
	}
	clicked := []string{"Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document", "Sec-Fetch-User", "?1"}
	if resp, _ := get(t, ann.c, base+"/password-reset/"+reset[1], clicked...); resp.StatusCode != http.StatusOK {
		t.Errorf("the reset link's page opened by its refusal's link: %d, want 200", resp.StatusCode)
	}
	if resp, _ := get(t, ann.c, base+"/password-reset/"+reset[1], followed...); resp.StatusCode != http.StatusOK {
		t.Errorf("the mailed reset link followed from the mail after other sites' navigations: %d, want 200", resp.StatusCode)
	}
	if resp, _ := get(t, ann.c, base+"/account", followed...); resp.StatusCode != http.StatusOK {
		t.Errorf("the account page by a link from another site: %d, want 200", resp.StatusCode)
	}
	endOthersEndsThief(t, base, ann, thief)
}

// TestLinksFromOtherSitesOpenInWebKit: Safari, and every browser on iOS,
// sends Sec-Fetch-Site but never Sec-Fetch-User, a link followed included:
// a link from another site (a webmail's, a protected application's on a
// sibling host) to the account's pages or a mailed link's page still opens
// it there, as before, rather than answering every such link 403.
func TestLinksFromOtherSitesOpenInWebKit(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "ann password", false)
	for _, ua := range []string{
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
	} {
		ann := newBrowser(t, "127.0.16.41", ua)
		ann.signIn(t, base, "ann@example.com", "ann password")
		followed := []string{"User-Agent", ua, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"}
		if resp, body := get(t, ann.c, base+"/account", followed...); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: the account page by a link from another site: %d %s, want 200", ua, resp.StatusCode, body)
		}
		if resp, _ := post(t, xcloaktest.Client(t, "127.0.16.42"), base+"/password-reset", formType, "email=ann%40example.com"); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("reset request: %d", resp.StatusCode)
		}
		reset := resetLink.FindStringSubmatch(env.Mail.WaitFor(t, "ann@example.com").Body)
		if reset == nil {
			t.Fatal("no reset link in the mail")
		}
		if resp, _ := get(t, ann.c, base+"/password-reset/"+reset[1], followed...); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: the mailed reset link followed from a webmail: %d, want 200", ua, resp.StatusCode)
		}
	}
	// Chrome, which sends Sec-Fetch-User for a link followed, is not taken
	// for one however its User-Agent reads.
	chrome := newBrowser(t, "127.0.16.43", chromeAndroid)
	chrome.signIn(t, base, "ann@example.com", "ann password")
	if resp, _ := get(t, chrome.c, base+"/account", "User-Agent", chromeAndroid, "Sec-Fetch-Site", "cross-site",
		"Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("/account as another site's script's navigation in Chrome: %d, want 403", resp.StatusCode)
	}
}
