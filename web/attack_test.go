package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// attackJSON is the "attack" object of GET /api/v1/admin/stats, read
// loosely so that a wrong shape shows.
func attackJSON(t *testing.T, c *http.Client, base string) map[string]any {
	t.Helper()
	_, body := getStats(t, c, base, "5m")
	var doc struct {
		Attack map[string]any `json:"attack"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Attack
}

func attackEvents(t *testing.T, env *xcloaktest.Env) []string {
	t.Helper()
	events, err := env.Dashboard.Events(t.Context(), dashboard.EventFilter{Kinds: []string{auth.EventAttackStarted, auth.EventAttackEnded, auth.EventAttackSwitched}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		out = append(out, e.Kind+" "+e.Detail["trigger"]+" "+e.Detail["by"])
	}
	return out
}

// TestAttackSwitch: only an administrator, from the same origin, can switch
// attack mode; the stats API, the page and the events say so, with who.
func TestAttackSwitch(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	env.AddUser(t, memberEmail, anyPassword, false)
	admin := xcloaktest.Client(t, "127.0.41.1")
	signIn(t, admin, base, adminEmail, anyPassword)
	member := xcloaktest.Client(t, "127.0.41.2")
	signIn(t, member, base, memberEmail, anyPassword)
	visitor := xcloaktest.Client(t, "127.0.41.3")
	on := url.Values{"mode": {"on"}, "period": {"1h"}}.Encode()

	off := map[string]any{"active": false, "since": nil, "trigger": nil}
	if got := attackJSON(t, admin, base); fmt.Sprint(got) != fmt.Sprint(off) {
		t.Fatalf("attack at start %v, want %v", got, off)
	}
	for _, tc := range []struct {
		name   string
		c      *http.Client
		body   string
		status int
		header []string
	}{
		{"cross-site", admin, on, 403, []string{"Sec-Fetch-Site", "cross-site"}},
		{"foreign origin", admin, on, 403, []string{"Origin", "https://evil.example"}},
		{"member", member, on, 403, []string{"Sec-Fetch-Site", "same-origin"}},
		{"visitor", visitor, on, 303, []string{"Sec-Fetch-Site", "same-origin"}},
		{"no mode", admin, "period=5m", 400, []string{"Sec-Fetch-Site", "same-origin"}},
		{"bad mode", admin, "mode=maybe", 400, []string{"Sec-Fetch-Site", "same-origin"}},
		{"mode twice", admin, "mode=on&mode=off", 400, []string{"Sec-Fetch-Site", "same-origin"}},
		{"bad period", admin, "mode=on&period=7d", 400, []string{"Sec-Fetch-Site", "same-origin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, tc.c, base+"/admin/attack", formType, tc.body, tc.header...)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %s; want %d", resp.StatusCode, body, tc.status)
			}
			if got := attackJSON(t, admin, base); fmt.Sprint(got) != fmt.Sprint(off) {
				t.Fatalf("attack mode changed: %v", got)
			}
		})
	}

	resp, _ := post(t, admin, base+"/admin/attack", formType, on, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin?notice=attack-on&period=1h" {
		t.Fatalf("on: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	got := attackJSON(t, admin, base)
	since, err := time.Parse(time.RFC3339, fmt.Sprint(got["since"]))
	if got["active"] != true || got["trigger"] != "admin" || err != nil || time.Since(since).Abs() > time.Hour {
		t.Fatalf("attack after on %v (since: %v)", got, err)
	}
	if !env.Attack.Active() {
		t.Error("the service does not see attack mode on")
	}
	_, page := get(t, admin, base+resp.Header.Get("Location"))
	for _, want := range []string{`id="attack-banner"`, `id="attack-panel"`, "switched on by administrator " + adminEmail,
		"It stays on until an administrator switches it off."} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}

	resp, _ = post(t, admin, base+"/admin/attack", formType, "mode=off", "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin?notice=attack-off&period=5m" {
		t.Fatalf("off: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := attackJSON(t, admin, base); fmt.Sprint(got) != fmt.Sprint(off) {
		t.Fatalf("attack after off %v", got)
	}
	_, page = get(t, admin, base+"/admin")
	if strings.Contains(page, `id="attack-banner"`) || !strings.Contains(page, `id="attack-panel"`) {
		t.Error("after off, the banner is still shown or the panel is gone")
	}
	if !strings.Contains(page, "Attack mode on") || !strings.Contains(page, "By administrator "+adminEmail) {
		t.Error("the events table does not show who switched attack mode")
	}
	want := fmt.Sprint([]string{"attack_started admin admin:" + adminEmail, "attack_ended admin admin:" + adminEmail})
	if got := fmt.Sprint(attackEvents(t, env)); got != want {
		t.Fatalf("events %s, want %s", got, want)
	}

	// Off while off starts or ends nothing, but holds the detector off for
	// the quiet period: that is recorded too.
	resp, _ = post(t, admin, base+"/admin/attack", formType, "mode=off", "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("off again: %d", resp.StatusCode)
	}
	want = fmt.Sprint([]string{"attack_started admin admin:" + adminEmail, "attack_ended admin admin:" + adminEmail, "attack_switched  admin:" + adminEmail})
	if got := fmt.Sprint(attackEvents(t, env)); got != want {
		t.Fatalf("events after off again %s, want %s", got, want)
	}
	if _, page = get(t, admin, base+"/admin"); !strings.Contains(page, "Attack detection held off") {
		t.Error("the events table does not show the detector held off")
	}
}

// TestAttackFromTraffic: sign-ins for unknown accounts over HTTP switch
// attack mode on by themselves; the stats API says "automatic", and the
// panel counts the attempts and their network.
func TestAttackFromTraffic(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Attack: xcloaktest.DetectAttacks})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.42.1")
	signIn(t, admin, base, adminEmail, anyPassword)
	env.Backdate(t, adminEmail, time.Hour) // not a browser new to its account
	bot := xcloaktest.Client(t, "127.0.43.7")
	for i := range 25 {
		if env.Attack.Active() {
			t.Logf("attack mode on after %d attempts", i)
			break
		}
		post(t, bot, base+"/api/v1/login", jsonType, loginJSON(fmt.Sprintf("nobody%d@example.com", i), fmt.Sprint("guess ", i)))
	}
	if !env.Attack.Active() {
		t.Fatal("25 attempts for unknown accounts did not switch attack mode on")
	}
	// Run's tick records it in Redis; this one makes sure it has.
	if err := env.Attack.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := attackJSON(t, admin, base); got["active"] != true || got["trigger"] != "automatic" {
		t.Fatalf("attack %v; want active and automatic", got)
	}
	_, page := get(t, admin, base+"/admin")
	for _, want := range []string{`id="attack-banner"`, "switched on automatically", "127.0.43.0/24", `data-counter="attack_unknown">20<`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if got := attackEvents(t, env); len(got) != 1 || got[0] != "attack_started automatic " {
		t.Fatalf("events %v; want one automatic attack_started", got)
	}
}

// TestAttackModeSignsOutNewBrowsers: a leaked password signed in from a
// new browser moments before the detector tripped; as attack mode starts,
// that browser is signed out and forgotten, and signing in again from it
// is held. A returning browser, known from before, keeps its session and
// signs in at once.
func TestAttackModeSignsOutNewBrowsers(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Attack: xcloaktest.DetectAttacks})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "ann's leaked password", false)
	env.AddUser(t, "bob@example.com", "bob's own password", false)
	bob := xcloaktest.Client(t, "127.0.44.1")
	signIn(t, bob, base, "bob@example.com", "bob's own password")
	env.Backdate(t, "bob@example.com", time.Hour)

	attacker := xcloaktest.Client(t, "127.0.45.1")
	signIn(t, attacker, base, "ann@example.com", "ann's leaked password")
	bot := xcloaktest.Client(t, "127.0.46.7")
	for i := 0; !env.Attack.Active(); i++ {
		if i == 40 {
			t.Fatal("40 attempts for unknown accounts did not switch attack mode on")
		}
		post(t, bot, base+"/api/v1/login", jsonType, loginJSON(fmt.Sprintf("nobody%d@example.com", i), fmt.Sprint("guess ", i)))
	}
	// Run's tick records the start, and signs the new browsers out.
	if err := env.Attack.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, attacker, base+"/account"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the new browser's session after attack mode started: %d, want a redirect to sign in", resp.StatusCode)
	}
	if resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "ann's leaked password")); resp.StatusCode != http.StatusAccepted {
		t.Errorf("the new browser signing in again: %d, want 202 (held)", resp.StatusCode)
	}
	if resp, _ := get(t, bob, base+"/account"); resp.StatusCode != http.StatusOK {
		t.Errorf("the returning browser's session: %d, want 200", resp.StatusCode)
	}
	signIn(t, bob, base, "bob@example.com", "bob's own password")
	env.Flush(t)
	events, err := env.Dashboard.Events(t.Context(), dashboard.EventFilter{Kinds: []string{auth.EventNewDeviceSignedOut}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Account != "ann@example.com" {
		t.Errorf("events %+v, want one new_device_signed_out for ann", events)
	}
}

// TestAttackModeShownWithoutRedis: while Redis cannot be read, the stats
// and the dashboard say attack mode is on as this replica holds it (new
// browsers are held by it), with since and trigger unknown, not "off".
func TestAttackModeShownWithoutRedis(t *testing.T) {
	srv := testenv.PrivateRedis(t)
	env := xcloaktest.New(t, xcloaktest.Options{Redis: fastRedis(t, srv.URL()), Prefix: "xcloak:"})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.47.1")
	signIn(t, admin, base, adminEmail, anyPassword)
	if _, err := env.Attack.SwitchAttack(t.Context(), true, "admin:"+adminEmail); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	got := attackJSON(t, admin, base)
	if got["active"] != true || got["since"] != nil || got["trigger"] != nil {
		t.Errorf("attack without Redis: %v; want active, since and trigger null", got)
	}
	_, page := get(t, admin, base+"/admin")
	if !strings.Contains(page, `id="attack-banner"`) || !strings.Contains(page, "as this replica last knew it") {
		t.Error("the dashboard without Redis does not show attack mode on")
	}
}
