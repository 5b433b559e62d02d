package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// activityBody is the body of GET /api/v1/account/activity.
type activityBody struct {
	Events []struct {
		Kind    string `json:"kind"`
		Network string `json:"network"`
		Count   int    `json:"count"`
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
// on the account, counted per network, and its sign-in from a new device;
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
	env.Flush(t)

	got := ann.activity(t, base, "")
	type entry struct {
		kind, network string
		count         int
	}
	want := []entry{
		{auth.EventLoginSucceeded, "127.0.17.3", 1},
		{auth.EventNewDevice, "127.0.17.3", 1},
		{auth.EventLoginFailed, "127.0.17.1", 2},
	}
	if len(got.Events) != len(want) {
		t.Fatalf("ann's activity: %+v, want %v", got.Events, want)
	}
	for i, w := range want {
		if e := got.Events[i]; (entry{e.Kind, e.Network, e.Count}) != w {
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
