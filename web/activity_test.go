package web_test

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// activityBody is the body of GET /api/v1/account/activity.
type activityBody struct {
	Events []struct {
		Kind      string `json:"kind"`
		Network   string `json:"network"`
		Count     int    `json:"count"`
		NewDevice bool   `json:"new_device"`
	} `json:"events"`
	NextCursor string `json:"next_cursor"`
}

func (b browser) activity(t *testing.T, base, query string) activityBody {
	t.Helper()
	resp, body := b.send(t, http.MethodGet, base+"/api/v1/account/activity"+query, "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/account/activity%s: %d %s", query, resp.StatusCode, body)
	}
	var out activityBody
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("activity body %q: %v", body, err)
	}
	return out
}

// TestActivityListsOwnEvents: the owner's list shows the failed attempts
// on the account, counted per network, and its sign-ins, the first marked
// as a new device's and the second, from the same browser, not;
// it shows nothing of another account's attempts and sign-ins, nor of
// attempts on the address made before the account existed; it pages by
// next_cursor.
func TestActivityListsOwnEvents(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	early := newBrowser(t, "127.0.17.9", firefoxLinux)
	if resp, _ := early.send(t, http.MethodPost, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "guess one")); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("attempt before the account: %d, want 401", resp.StatusCode)
	}
	env.Flush(t)
	env.AddUser(t, "ann@example.com", "ann password", false)
	env.AddUser(t, "bob@example.com", "bob password", false)
	attacker := newBrowser(t, "127.0.17.1", chromeAndroid)
	for range 2 {
		if resp, _ := attacker.send(t, http.MethodPost, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "wrong guess")); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong password: %d, want 401", resp.StatusCode)
		}
	}
	bob := newBrowser(t, "127.0.17.2", firefoxLinux)
	if resp, _ := bob.send(t, http.MethodPost, base+"/api/v1/login", jsonType, loginJSON("bob@example.com", "wrong guess")); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bob's wrong password: %d, want 401", resp.StatusCode)
	}
	bob.signIn(t, base, "bob@example.com", "bob password")
	ann := newBrowser(t, "127.0.17.3", firefoxLinux)
	ann.signIn(t, base, "ann@example.com", "ann password")
	ann.signIn(t, base, "ann@example.com", "ann password")
	env.Flush(t)

	got := ann.activity(t, base, "")
	type entry struct {
		kind, network string
		count         int
		newDevice     bool
	}
	want := []entry{
		{auth.EventLoginSucceeded, "127.0.17.3", 1, false},
		{auth.EventLoginSucceeded, "127.0.17.3", 1, true},
		{auth.EventLoginFailed, "127.0.17.1", 2, false},
	}
	if len(got.Events) != len(want) {
		t.Fatalf("ann's activity: %+v, want %v", got.Events, want)
	}
	for i, w := range want {
		if e := got.Events[i]; (entry{e.Kind, e.Network, e.Count, e.NewDevice}) != w {
			t.Errorf("ann's entry %d: %+v, want %+v", i, e, w)
		}
	}
	if got.NextCursor != "" {
		t.Errorf("a whole list in one page has next_cursor %q", got.NextCursor)
	}

	first := ann.activity(t, base, "?limit=2")
	if len(first.Events) != 2 || first.NextCursor == "" {
		t.Fatalf("first page of 2: %+v", first)
	}
	rest := ann.activity(t, base, "?limit=2&cursor="+url.QueryEscape(first.NextCursor))
	if len(rest.Events) != 1 || rest.Events[0].Kind != auth.EventLoginFailed || rest.Events[0].Count != 2 {
		t.Errorf("second page of 2: %+v, want the grouped failures", rest.Events)
	}
}

// TestActivityRefusesBadInput: a malformed limit or cursor is 400
// invalid_request; signed out is 401; a restricted session is 403.
func TestActivityRefusesBadInput(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	b := newBrowser(t, "127.0.17.4", firefoxLinux)
	if resp, body := b.send(t, http.MethodGet, base+"/api/v1/account/activity", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("signed out: %d %s, want 401", resp.StatusCode, body)
	}
	env.AddUser(t, "ann@example.com", "ann password", false)
	b.signIn(t, base, "ann@example.com", "ann password")
	for _, q := range []string{"?limit=0", "?limit=51", "?limit=x", "?limit=-1", "?limit=1&limit=2",
		"?cursor=", "?cursor=x", "?cursor=1", "?cursor=1-x", "?cursor=-1-2", "?cursor=0-0", "?cursor=99999999999999999999-1"} {
		if resp, body := b.send(t, http.MethodGet, base+"/api/v1/account/activity"+q, "", ""); resp.StatusCode != http.StatusBadRequest || errorCode(t, body) != "invalid_request" {
			t.Errorf("%s: %d %s, want 400 invalid_request", q, resp.StatusCode, body)
		}
	}
}

// TestActivityLimited: the list counts against account_ip like the other
// account routes, past which it answers 429 with Retry-After.
func TestActivityLimited(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleAccountIP, 2) }})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "ann password", false)
	b := newBrowser(t, "127.0.17.5", firefoxLinux)
	b.signIn(t, base, "ann@example.com", "ann password")
	b.activity(t, base, "")
	b.activity(t, base, "")
	resp, body := b.send(t, http.MethodGet, base+"/api/v1/account/activity", "", "")
	if resp.StatusCode != http.StatusTooManyRequests || errorCode(t, body) != "too_many_attempts" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("third request: %d %s, want 429 too_many_attempts with Retry-After", resp.StatusCode, body)
	}
}

// TestActivityPage: the account page links to the activity page, which
// shows the failed attempt and the new-device sign-in in words, and pages
// by its Older activity link; a bad cursor is a 400 page.
func TestActivityPage(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "ann password", false)
	attacker := newBrowser(t, "127.0.17.6", chromeAndroid)
	if resp, _ := attacker.send(t, http.MethodPost, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "wrong guess")); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d, want 401", resp.StatusCode)
	}
	ann := newBrowser(t, "127.0.17.7", firefoxLinux)
	ann.signIn(t, base, "ann@example.com", "ann password")
	env.Flush(t)
	if _, body := ann.send(t, http.MethodGet, base+"/account", "", ""); !strings.Contains(body, `href="/account/activity"`) {
		t.Errorf("the account page does not link to the activity page:\n%s", body)
	}
	resp, body := ann.send(t, http.MethodGet, base+"/account/activity", "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("activity page: %d", resp.StatusCode)
	}
	for _, want := range []string{"Failed sign-in attempt", "127.0.17.6", "Signed in from a new device", "127.0.17.7"} {
		if !strings.Contains(body, want) {
			t.Errorf("activity page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "Older activity") {
		t.Errorf("a whole list in one page links to an older page")
	}
	resp, body = ann.send(t, http.MethodGet, base+"/account/activity?limit=1", "", "")
	i := strings.Index(body, `/account/activity?cursor=`)
	if resp.StatusCode != http.StatusOK || i < 0 || strings.Contains(body, "127.0.17.6") {
		t.Fatalf("first page of 1: %d, want the newest entry and a link to older ones:\n%s", resp.StatusCode, body)
	}
	next := html.UnescapeString(body[i : strings.Index(body[i:], `"`)+i])
	if _, body := ann.send(t, http.MethodGet, base+strings.Replace(next, "limit=1", "limit=50", 1), "", ""); !strings.Contains(body, "127.0.17.6") || strings.Contains(body, "Signed in from") {
		t.Errorf("older page %s lacks the failure or repeats the sign-in:\n%s", next, body)
	}
	if resp, _ := ann.send(t, http.MethodGet, base+"/account/activity?cursor=nope", "", ""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad cursor: %d, want 400", resp.StatusCode)
	}
}
