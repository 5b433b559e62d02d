package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/web"
)

// decision is an answer of POST /api/v1/attempts.
type decision struct {
	Decision          string `json:"decision"`
	AttemptID         string `json:"attempt_id"`
	Reason            string `json:"reason"`
	RetryAfterSeconds int    `json:"retry_after_seconds"`
	Error             string `json:"error"`
	Field             string `json:"field"`
	Message           string `json:"message"`
}

// app is one application calling the decision API of a server.
type app struct {
	t    *testing.T
	base string
	key  string
	c    *http.Client
}

func newApp(t *testing.T, base, key string) *app {
	c := xcloaktest.Client(t, "127.0.9.1")
	c.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	return &app{t: t, base: base, key: key, c: c}
}

// ask posts an attempt and returns the status, the decoded answer and the
// response.
func (a *app) ask(kind, account, clientIP, device string) (int, decision, *http.Response) {
	a.t.Helper()
	body, _ := json.Marshal(map[string]string{"kind": kind, "account": account, "client_ip": clientIP, "device": device})
	if device == "" {
		body, _ = json.Marshal(map[string]string{"kind": kind, "account": account, "client_ip": clientIP})
	}
	return a.raw(a.base+"/api/v1/attempts", string(body))
}

// outcome reports an attempt's result and returns the status and answer.
func (a *app) outcome(id, result string) (int, decision) {
	a.t.Helper()
	status, d, _ := a.raw(a.base+"/api/v1/attempts/"+id+"/outcome", `{"result":"`+result+`"}`)
	return status, d
}

// succeeded reports a success for the attempt id names, which what
// describes in the failure.
func (a *app) succeeded(id, what string) {
	a.t.Helper()
	if status, d := a.outcome(id, "success"); status != 204 {
		a.t.Fatalf("%s: %d %+v, want 204", what, status, d)
	}
}

// decidedInAttack switches attack mode on and asks for account's sign-in
// from clientIP and device, which must be decided want: "allow" for a
// known device, "challenge" for any other.
func (a *app) decidedInAttack(env *xcloaktest.Env, account, clientIP, device, want, what string) {
	a.t.Helper()
	if _, err := env.Attack.SwitchAttack(a.t.Context(), true, "test"); err != nil {
		a.t.Fatal(err)
	}
	if status, d, _ := a.ask("login", account, clientIP, device); status != 200 || d.Decision != want {
		a.t.Fatalf("%s, in attack mode: %d %+v, want %s", what, status, d, want)
	}
}

func (a *app) raw(url, body string) (int, decision, *http.Response) {
	a.t.Helper()
	resp, text := post(a.t, a.c, url, jsonType, body, "Authorization", "Bearer "+a.key)
	var d decision
	if text != "" {
		if err := json.Unmarshal([]byte(text), &d); err != nil {
			a.t.Fatalf("answer %q: %v", text, err)
		}
	}
	return resp.StatusCode, d, resp
}

// TestAttemptsExactOverHTTP: 500 concurrent attempts for one account from
// 50 client addresses allow exactly the account's limit, on one replica
// and split over two.
func TestAttemptsExactOverHTTP(t *testing.T) {
	for _, replicas := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d replicas", replicas), func(t *testing.T) {
			env := xcloaktest.New(t, xcloaktest.Options{})
			key := env.AddAPIKey(t, "shop")
			apps := []*app{newApp(t, env.Start(t), key)}
			if replicas == 2 {
				apps = append(apps, newApp(t, env.Replica(t, xcloaktest.Options{}).Start(t), key))
			}
			const attempts, addresses = 500, 50
			var (
				wg      sync.WaitGroup
				start   = make(chan struct{})
				mu      sync.Mutex
				byCode  = map[int]int{}
				allowed = map[string]bool{}
			)
			for i := range attempts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					a := apps[i%len(apps)]
					body := fmt.Sprintf(`{"kind":"login","account":"Alice@Example.com","client_ip":"10.1.2.%d"}`, i%addresses)
					resp, text := post(t, a.c, a.base+"/api/v1/attempts", jsonType, body, "Authorization", "Bearer "+key)
					var d decision
					_ = json.Unmarshal([]byte(text), &d)
					mu.Lock()
					defer mu.Unlock()
					byCode[resp.StatusCode]++
					if resp.StatusCode == 200 {
						allowed[d.AttemptID] = true
					}
				}()
			}
			close(start)
			wg.Wait()
			limit := env.Auth.Limits[auth.RuleLoginAccount].Count
			if byCode[200] != limit || byCode[429] != attempts-limit || len(allowed) != limit {
				t.Fatalf("answers %v, %d distinct attempt ids; want exactly %d allowed and the rest 429", byCode, len(allowed), limit)
			}
		})
	}
}

// TestAttemptDecisions: the answers' shapes, the deny's Retry-After, and
// accounts folded so that case tricks get no fresh quota.
func TestAttemptDecisions(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 2) }})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	for i, account := range []string{"bob", " BOB "} {
		status, d, _ := a.ask("login", account, "192.0.2.1", "")
		if status != 200 || d.Decision != "allow" || d.AttemptID == "" {
			t.Fatalf("attempt %d: %d %+v, want 200 allow with an attempt id", i, status, d)
		}
	}
	status, d, resp := a.ask("login", "ｂｏｂ", "192.0.2.2", "") // fullwidth: NFKC folds it to bob
	if status != 429 || d.Decision != "deny" || d.Reason != "rate_limited" || d.RetryAfterSeconds < 1 ||
		resp.Header.Get("Retry-After") != fmt.Sprint(d.RetryAfterSeconds) {
		t.Fatalf("third attempt: %d %+v Retry-After %q; want 429 deny rate_limited with a matching Retry-After",
			status, d, resp.Header.Get("Retry-After"))
	}
	if status, d, _ := a.ask("reset", "bob", "192.0.2.1", ""); status != 200 || d.Decision != "allow" {
		t.Fatalf("reset: %d %+v, want 200 allow", status, d)
	}
}

// TestAttemptLockoutThroughOutcomes: failures reported through outcomes
// lock the account; its known device still passes, and a success from it
// is not refused.
func TestAttemptLockoutThroughOutcomes(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))

	// The owner signs in from the laptop: it becomes a known device.
	status, d, _ := a.ask("login", "carol", "198.51.100.7", "laptop-1")
	if status != 200 || d.Decision != "allow" {
		t.Fatalf("owner's first attempt: %d %+v", status, d)
	}
	if status, _ := a.outcome(d.AttemptID, "success"); status != 204 {
		t.Fatalf("owner's success: %d, want 204", status)
	}

	for i := range env.Auth.Lockout.Threshold {
		status, d, _ := a.ask("login", "carol", fmt.Sprintf("203.0.113.%d", i), "")
		if status != 200 {
			t.Fatalf("guess %d: %d %+v", i, status, d)
		}
		if status, _ := a.outcome(d.AttemptID, "failure"); status != 204 {
			t.Fatalf("guess %d's failure: %d", i, status)
		}
	}
	status, d, _ = a.ask("login", "carol", "203.0.113.200", "")
	if status != 429 || d.Reason != "locked" {
		t.Fatalf("after %d failures: %d %+v, want 429 locked", env.Auth.Lockout.Threshold, status, d)
	}
	status, d, _ = a.ask("login", "carol", "203.0.113.201", "attackers-box")
	if status != 429 || d.Reason != "locked" {
		t.Fatalf("an unknown device during the lockout: %d %+v, want 429 locked", status, d)
	}
	status, d, _ = a.ask("login", "carol", "198.51.100.7", "laptop-1")
	if status != 200 || d.Decision != "allow" {
		t.Fatalf("the owner's known device during the lockout: %d %+v, want 200 allow", status, d)
	}
	if status, _ := a.outcome(d.AttemptID, "success"); status != 204 {
		t.Fatalf("owner's success during the lockout: %d", status)
	}
}

// TestAttemptChallenge: in attack mode a device that is not known is
// challenged; a known one is not.
func TestAttemptChallenge(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	_, d, _ := a.ask("login", "dave", "198.51.100.8", "phone")
	if d.Decision != "allow" {
		t.Fatalf("before attack mode: %+v, want allow", d)
	}
	if status, _ := a.outcome(d.AttemptID, "success"); status != 204 {
		t.Fatalf("success: %d", status)
	}
	if _, err := env.Attack.SwitchAttack(t.Context(), true, "test"); err != nil {
		t.Fatal(err)
	}
	for _, device := range []string{"", "tablet"} {
		if status, d, _ := a.ask("login", "dave", "198.51.100.9", device); status != 200 || d.Decision != "challenge" || d.AttemptID == "" {
			t.Fatalf("device %q in attack mode: %d %+v, want 200 challenge", device, status, d)
		}
	}
	if status, d, _ := a.ask("login", "dave", "198.51.100.8", "phone"); status != 200 || d.Decision != "allow" {
		t.Fatalf("known device in attack mode: %d %+v, want allow", status, d)
	}
}

// TestAttemptChallengedSuccessKnowsNoDevice: the right password of a
// challenged attempt, reported as the docs ask, proves only the password,
// which in credential stuffing is what the attacker has. Its device stays
// unknown, so the next attempt from it is challenged again, and it counts
// towards the account's lockout as XCloak's own held sign-ins do: were it
// not counted, an account that failed to lock after its threshold of
// challenged tries would say that one of them was right.
func TestAttemptChallengedSuccessKnowsNoDevice(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	if _, err := env.Attack.SwitchAttack(t.Context(), true, "test"); err != nil {
		t.Fatal(err)
	}
	_, d, _ := a.ask("login", "erin", "203.0.113.7", "bot-box")
	if d.Decision != "challenge" {
		t.Fatalf("a new device in attack mode: %+v, want challenge", d)
	}
	if status, _ := a.outcome(d.AttemptID, "success"); status != 204 {
		t.Fatalf("the leaked password's success: %d, want 204", status)
	}
	_, d, _ = a.ask("login", "erin", "203.0.113.8", "bot-box")
	if d.Decision != "challenge" {
		t.Fatalf("the same device again: %+v, want challenge: it never passed the application's check", d)
	}
	if status, _ := a.outcome(d.AttemptID, "success"); status != 204 {
		t.Fatalf("success: %d", status)
	}
	for i := 2; i < env.Auth.Lockout.Threshold; i++ {
		_, d, _ := a.ask("login", "erin", fmt.Sprintf("203.0.113.%d", 10+i), "")
		if d.Decision != "challenge" {
			t.Fatalf("attempt %d: %+v, want challenge", i, d)
		}
		if status, _ := a.outcome(d.AttemptID, "success"); status != 204 {
			t.Fatalf("attempt %d's success: %d", i, status)
		}
	}
	if status, d, _ := a.ask("login", "erin", "203.0.113.99", ""); status != 429 || d.Reason != "locked" {
		t.Fatalf("after %d challenged successes: %d %+v, want 429 locked, as after as many failures", env.Auth.Lockout.Threshold, status, d)
	}
}

// TestAttemptOutcomeUnknown: an attempt id is single use, signed and the
// asking key's own; everything else is 404 unknown_attempt.
func TestAttemptOutcomeUnknown(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	shop := newApp(t, base, env.AddAPIKey(t, "shop"))
	blog := newApp(t, base, env.AddAPIKey(t, "blog"))
	_, d, _ := shop.ask("login", "erin", "192.0.2.10", "")
	_, other, _ := shop.ask("login", "erin", "192.0.2.10", "")
	body, sig, _ := strings.Cut(d.AttemptID, ".")
	tampered := []byte(body)
	tampered[len(tampered)/2] ^= 1
	for name, try := range map[string]func() (int, decision){
		"another key's": func() (int, decision) { return blog.outcome(d.AttemptID, "success") },
		"forged":        func() (int, decision) { return shop.outcome(body+".AAAA", "success") },
		"tampered":      func() (int, decision) { return shop.outcome(string(tampered)+"."+sig, "success") },
		"made up":       func() (int, decision) { return shop.outcome("nothing", "failure") },
		"another's sig": func() (int, decision) {
			return shop.outcome(body+"."+strings.SplitN(other.AttemptID, ".", 2)[1], "success")
		},
		"bad base64": func() (int, decision) { return shop.outcome("!!.**", "success") },
	} {
		if status, got := try(); status != 404 || got.Error != "unknown_attempt" {
			t.Errorf("%s id: %d %+v, want 404 unknown_attempt", name, status, got)
		}
	}
	if status, _ := shop.outcome(d.AttemptID, "success"); status != 204 {
		t.Fatalf("first outcome: %d, want 204", status)
	}
	if status, got := shop.outcome(d.AttemptID, "failure"); status != 404 || got.Error != "unknown_attempt" {
		t.Fatalf("reused id: %d %+v, want 404 unknown_attempt", status, got)
	}
	if status, got := shop.outcome(other.AttemptID, "maybe"); status != 400 || got.Field != "result" {
		t.Fatalf("bad result: %d %+v, want 400 naming result", status, got)
	}
	if status, got, _ := shop.raw(shop.base+"/api/v1/attempts/"+other.AttemptID+"/outcome", `null`); status != 400 || got.Field != "body" {
		t.Fatalf("null for an outcome: %d %+v, want 400 naming body", status, got)
	}
	if status, _ := shop.outcome(other.AttemptID, "failure"); status != 204 {
		t.Fatalf("a bad result must not use the id up: %d, want 204", status)
	}
}

// TestAttemptOutcomeTakenOnceAtOnce: one attempt id reported many times
// at once, over two replicas, takes exactly one outcome, and its failure
// counts once towards the account's lockout.
func TestAttemptOutcomeTakenOnceAtOnce(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Lockout.Threshold = 2 }})
	key := env.AddAPIKey(t, "shop")
	apps := []*app{newApp(t, env.Start(t), key), newApp(t, env.Replica(t, xcloaktest.Options{}).Start(t), key)}
	_, d, _ := apps[0].ask("login", "ida", "192.0.2.77", "")
	const reports = 40
	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		mu     sync.Mutex
		byCode = map[int]int{}
	)
	for i := range reports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			status, _ := apps[i%2].outcome(d.AttemptID, "failure")
			mu.Lock()
			defer mu.Unlock()
			byCode[status]++
		}()
	}
	close(start)
	wg.Wait()
	if byCode[204] != 1 || byCode[404] != reports-1 {
		t.Fatalf("%d reports of one id at once: %v, want one 204 and the rest 404", reports, byCode)
	}
	if status, d, _ := apps[0].ask("login", "ida", "192.0.2.78", ""); status != 200 {
		t.Fatalf("after one failure of a lockout threshold of 2: %d %+v, want 200", status, d)
	}
}

// TestAttemptBadRequests: every malformed body is 400 naming its field.
func TestAttemptBadRequests(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	for _, tc := range []struct{ body, field string }{
		{`{"kind":"login","account":"x","client_ip":"300.1.1.1"}`, "client_ip"},
		{`{"kind":"login","account":"x","client_ip":"fe80::1%eth0"}`, "client_ip"},
		{`{"kind":"login","account":"x"}`, "client_ip"},
		{`{"kind":"login","account":"x","client_ip":1}`, "client_ip"},
		{`{"kind":"signup","account":"x","client_ip":"192.0.2.1"}`, "kind"},
		{`{"account":"x","client_ip":"192.0.2.1"}`, "kind"},
		{`{"kind":"login","account":"  ","client_ip":"192.0.2.1"}`, "account"},
		{`{"kind":"login","account":"a\u0007b","client_ip":"192.0.2.1"}`, "account"},
		{`{"kind":"login","account":"` + strings.Repeat("a", 321) + `","client_ip":"192.0.2.1"}`, "account"},
		{`{"kind":"login","account":["x"],"client_ip":"192.0.2.1"}`, "account"},
		{`{"kind":"login","account":"x","client_ip":"192.0.2.1","device":"` + strings.Repeat("d", 513) + `"}`, "device"},
		{`{"kind":"login","account":"x","client_ip":"192.0.2.1","password":"p"}`, "password"},
		{`{"kind":"login","account":"x","client_ip":"192.0.2.1"} {}`, "body"},
		{`{"kind":"login","account":"x","Account":"y","client_ip":"192.0.2.1"}`, "body"},
		{`{"kind":"login","account":"a\ud800","client_ip":"192.0.2.1"}`, "body"},
		// Names are the contract's, case and all: what checks the body
		// by them on the way must not miss a field XCloak reads.
		{`{"KIND":"login","account":"x","client_ip":"192.0.2.1"}`, "KIND"},
		{`{"kind":"login","Account":"x","client_ip":"192.0.2.1"}`, "Account"},
		{`{"kind":"login","account":"x","client_\u0049p":"192.0.2.1"}`, "client_Ip"},
		{`[1]`, "body"},
		{`null`, "body"},
		{` null `, "body"},
		{`not json`, "body"},
		{`{"kind":"login","account":"x","client_ip":"192.0.2.1","pad":"` + strings.Repeat("p", 70<<10) + `"}`, "body"},
		// NUL, escaped, is a control character of whichever field holds it.
		{`{"kind":"login","account":"x\u0000","client_ip":"192.0.2.1"}`, "account"},
		{`{"kind":"login","account":"x","client_ip":"192.0.2.1","device":"d\u0000"}`, "device"},
		{`{"kind":"login\u0000","account":"x","client_ip":"192.0.2.1"}`, "kind"},
		{`{"kind":"login","account":"x","client_ip":"192.0.2.1\u0000"}`, "client_ip"},
		{"{\"kind\":\"login\",\"account\":\"x\xff\",\"client_ip\":\"192.0.2.1\"}", "body"},
		// A zone, an IPv4-mapped or a translated address's included, and
		// whatever else is not one address.
		{`{"kind":"login","account":"x","client_ip":"::ffff:192.0.2.1%eth0"}`, "client_ip"},
		{`{"kind":"login","account":"x","client_ip":"64:ff9b::192.0.2.1%1"}`, "client_ip"},
		{`{"kind":"login","account":"x","client_ip":"192.0.2.0/24"}`, "client_ip"},
		{`{"kind":"login","account":"x","client_ip":"192.0.2.1:80"}`, "client_ip"},
		{`{"kind":"login","account":"x","client_ip":"[::1]"}`, "client_ip"},
		{`{"kind":"login","account":"x","client_ip":null}`, "client_ip"},
		{`{"kind":"login","account":"x","client_ip":{"a":[1]}}`, "client_ip"},
		{`{"kind":"login","account":"x","client_ip":1e999}`, "client_ip"},
		{strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000), "body"},
		{`{"kind":` + strings.Repeat("[", 30000) + strings.Repeat("]", 30000) + `}`, "body"},
	} {
		status, d, _ := a.raw(a.base+"/api/v1/attempts", tc.body)
		if status != 400 || d.Error != "invalid_request" || d.Field != tc.field || d.Message == "" {
			t.Errorf("%.80s: %d %+v, want 400 invalid_request naming %s", tc.body, status, d, tc.field)
		}
	}
}

// TestAttemptsNamespacedByApplication: an application's lockout of
// "alice@example.com" holds neither another application's alice nor
// XCloak's own account of that address, and its answers for an address
// XCloak has an account of are the answers for any other.
func TestAttemptsNamespacedByApplication(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	base := env.Start(t)
	env.AddUser(t, "alice@example.com", "alice's password", false)
	shop := newApp(t, base, env.AddAPIKey(t, "shop"))
	blog := newApp(t, base, env.AddAPIKey(t, "blog"))

	answers := map[string]string{}
	for _, account := range []string{"alice@example.com", "nobody@example.com"} {
		status, d, resp := shop.ask("login", account, "192.0.2.20", "")
		// Reported, as the application would: an attempt left without
		// its outcome holds a place towards the lockout for a minute.
		if status, _ := shop.outcome(d.AttemptID, "failure"); status != 204 {
			t.Fatalf("%s's first failure: %d", account, status)
		}
		d.AttemptID = ""
		answers[account] = fmt.Sprintf("%d %+v %d", status, d, len(resp.Header))
	}
	if answers["alice@example.com"] != answers["nobody@example.com"] {
		t.Fatalf("XCloak's own account answered apart: %v", answers)
	}

	for i := range env.Auth.Lockout.Threshold - 1 {
		_, d, _ := shop.ask("login", "alice@example.com", fmt.Sprintf("203.0.113.%d", i), "")
		if status, _ := shop.outcome(d.AttemptID, "failure"); status != 204 {
			t.Fatalf("failure %d: %d", i, status)
		}
	}
	if status, d, _ := shop.ask("login", "alice@example.com", "192.0.2.21", ""); status != 429 || d.Reason != "locked" {
		t.Fatalf("shop's alice: %d %+v, want locked", status, d)
	}
	if status, d, _ := blog.ask("login", "alice@example.com", "192.0.2.21", ""); status != 200 {
		t.Fatalf("blog's alice: %d %+v, want allowed", status, d)
	}
	browser := xcloaktest.Client(t, "127.0.9.2")
	if resp, body := post(t, browser, base+"/api/v1/login", jsonType, loginJSON("alice@example.com", "alice's password")); resp.StatusCode != 200 {
		t.Fatalf("XCloak's own alice signing in: %d %s, want 200", resp.StatusCode, body)
	}
}

// TestAttemptEventsNameTheApplication: decisions and outcomes record the
// events XCloak's own sign-in records, with the application's name.
func TestAttemptEventsNameTheApplication(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 2) }})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	_, d1, _ := a.ask("login", "frank", "192.0.2.30", "pc")
	_, d2, _ := a.ask("login", "frank", "192.0.2.30", "pc")
	a.ask("login", "frank", "192.0.2.30", "pc")
	a.outcome(d1.AttemptID, "failure")
	a.outcome(d2.AttemptID, "success")
	env.Flush(t)
	rows, err := env.DB.Query(t.Context(), `SELECT kind, coalesce(account_key, ''), coalesce(detail->>'app', '') FROM security_events`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]bool{}
	for rows.Next() {
		var kind, account, appName string
		if err := rows.Scan(&kind, &account, &appName); err != nil {
			t.Fatal(err)
		}
		got[kind+" "+account+" "+appName] = true
	}
	for _, want := range []string{"login_rejected app shop frank shop", "login_failed app shop frank shop",
		"login_succeeded app shop frank shop", "new_device app shop frank shop"} {
		if !got[want] {
			t.Errorf("no event %q among %v", want, got)
		}
	}
}

// TestAttemptLockoutEventNamesTheApplication: the lockout that an
// application's reported failures cause is recorded with the application's
// name, as its other events are, and so are the devices' own.
func TestAttemptLockoutEventNamesTheApplication(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	for i := range env.Auth.Lockout.Threshold {
		_, d, _ := a.ask("login", "gina", fmt.Sprintf("203.0.113.%d", 100+i), "")
		if status, _ := a.outcome(d.AttemptID, "failure"); status != 204 {
			t.Fatalf("failure %d: %d", i, status)
		}
	}
	env.Flush(t)
	var app string
	if err := env.DB.QueryRow(t.Context(), `SELECT coalesce(detail->>'app', '') FROM security_events
		WHERE kind = 'lockout' AND account_key = 'app shop gina'`).Scan(&app); err != nil {
		t.Fatalf("the lockout's event: %v", err)
	}
	if app != "shop" {
		t.Fatalf("the lockout's event names application %q, want shop", app)
	}
}

// TestDashboardApplications: the dashboard and the stats JSON list each
// application's attempts, denials and reported outcomes.
func TestDashboardApplications(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 3) }})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	shop := newApp(t, base, env.AddAPIKey(t, "shop"))
	blog := newApp(t, base, env.AddAPIKey(t, "blog.example"))
	var ids []string
	for range 5 { // 3 allowed, 2 denied
		if _, d, _ := shop.ask("login", "hank", "192.0.2.50", ""); d.AttemptID != "" {
			ids = append(ids, d.AttemptID)
		}
	}
	shop.outcome(ids[0], "failure")
	shop.outcome(ids[1], "failure")
	shop.outcome(ids[2], "success")
	blog.ask("reset", "hank", "192.0.2.51", "")
	env.Flush(t)

	admin := xcloaktest.Client(t, "127.0.9.7")
	signIn(t, admin, base, adminEmail, anyPassword)
	_, body := getStats(t, admin, base, "1h")
	var got struct {
		Applications []struct {
			Name                                  string
			Attempts, Denied, Failures, Successes int64
		} `json:"applications"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := "[{shop 5 2 2 1} {blog.example 1 0 0 0}]"
	if fmt.Sprint(got.Applications) != want {
		t.Fatalf("applications %v, want %s", got.Applications, want)
	}
	_, page := get(t, admin, base+"/admin?period=1h")
	for _, s := range []string{`data-app="shop"`, `data-app="blog.example"`, "Applications"} {
		if !strings.Contains(page, s) {
			t.Errorf("the dashboard page has no %s", s)
		}
	}
}

// TestDashboardApplicationsByApplication: the stats JSON lists an
// application once, under its name, whichever of its keys asked: a key
// made with apikey add --app counts with the key it replaces, not under
// its own name.
func TestDashboardApplicationsByApplication(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	shop := newApp(t, base, env.AddAPIKey(t, "shop"))
	key, _, err := env.Service.AddAPIKeyFor(t.Context(), "shop-2", "shop", "cli")
	if err != nil {
		t.Fatal(err)
	}
	rotated := newApp(t, base, key)
	shop.ask("login", "hank", "192.0.2.50", "")
	rotated.ask("login", "hank", "192.0.2.50", "")
	rotated.ask("login", "ivy", "192.0.2.50", "")
	env.Flush(t)

	admin := xcloaktest.Client(t, "127.0.9.7")
	signIn(t, admin, base, adminEmail, anyPassword)
	_, body := getStats(t, admin, base, "1h")
	var got struct {
		Applications []struct {
			Name     string
			Attempts int64
		} `json:"applications"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if want := "[{shop 3}]"; fmt.Sprint(got.Applications) != want {
		t.Fatalf("applications %v, want %s", got.Applications, want)
	}
	// The panel says how it counts: a key's name would not find shop-2's
	// attempts.
	_, page := get(t, admin, base+"/admin?period=1h")
	if !strings.Contains(page, `data-app="shop"`) || strings.Contains(page, `data-app="shop-2"`) || strings.Contains(page, "by API key name") {
		t.Errorf("the dashboard's Applications panel does not list shop alone, by application")
	}
}

// TestUnlockApplicationAccount: the dashboard's Unlock ends an
// application account's lockout, as it lists it.
func TestUnlockApplicationAccount(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	shop := newApp(t, base, env.AddAPIKey(t, "shop"))
	for i := range env.Auth.Lockout.Threshold {
		_, d, _ := shop.ask("login", "Ivy Smith", fmt.Sprintf("203.0.113.%d", i), "")
		shop.outcome(d.AttemptID, "failure")
	}
	if status, d, _ := shop.ask("login", "ivy smith", "192.0.2.60", ""); status != 429 || d.Reason != "locked" {
		t.Fatalf("after the failures: %d %+v, want locked", status, d)
	}
	admin := xcloaktest.Client(t, "127.0.9.8")
	signIn(t, admin, base, adminEmail, anyPassword)
	_, page := get(t, admin, base+"/admin")
	if !strings.Contains(page, "app shop ivy smith") {
		t.Fatalf("the dashboard does not list the lockout of app shop ivy smith")
	}
	resp, _ := post(t, admin, base+"/admin/lockouts/unlock", formType, "email=app+shop+ivy+smith&period=5m")
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "notice=unlocked") {
		t.Fatalf("unlock: %d %s, want 303 to notice=unlocked", resp.StatusCode, resp.Header.Get("Location"))
	}
	if status, d, _ := shop.ask("login", "ivy smith", "192.0.2.60", ""); status != 200 {
		t.Fatalf("after the unlock: %d %+v, want allowed", status, d)
	}
}

// TestAttemptIDExpires: a sign-in's attempt id works for auth.AttemptTTL
// and not a moment longer; a reset's for auth.ResetAttemptTTL, the time a
// user may take to open the application's mail and choose a password.
func TestAttemptIDExpires(t *testing.T) {
	// On a whole second, as ids tell their issue in whole seconds.
	clk := &clock{t: time.Now().Truncate(time.Second)}
	env := xcloaktest.New(t, xcloaktest.Options{Now: clk.Now})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	_, late, _ := a.ask("login", "jo", "192.0.2.70", "")
	_, reset, _ := a.ask("reset", "jo", "192.0.2.70", "")
	_, lateReset, _ := a.ask("reset", "jo", "192.0.2.70", "")
	clk.Advance(auth.AttemptTTL)
	if status, d := a.outcome(late.AttemptID, "failure"); status != 404 || d.Error != "unknown_attempt" {
		t.Fatalf("a sign-in's outcome at expiry: %d %+v, want 404 unknown_attempt", status, d)
	}
	if status, _ := a.outcome(reset.AttemptID, "success"); status != 204 {
		t.Fatalf("a reset completed %s after it was asked for: %d, want 204", auth.AttemptTTL, status)
	}
	clk.Advance(auth.ResetAttemptTTL - auth.AttemptTTL)
	if status, d := a.outcome(lateReset.AttemptID, "success"); status != 404 || d.Error != "unknown_attempt" {
		t.Fatalf("a reset's outcome at expiry: %d %+v, want 404 unknown_attempt", status, d)
	}
}

// TestAttemptFailuresFeedAttackDetection: failures an application reports
// switch attack mode on as XCloak's own failures do, and its next new
// device is challenged.
func TestAttemptFailuresFeedAttackDetection(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Attack: xcloaktest.DetectAttacks})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	for i := 0; !env.Attack.Active(); i++ {
		if i == 60 {
			t.Fatal("60 failures reported did not switch attack mode on")
		}
		_, d, _ := a.ask("login", fmt.Sprint("victim", i), fmt.Sprintf("203.0.113.%d", i), "")
		if status, _ := a.outcome(d.AttemptID, "failure"); status != 204 {
			t.Fatalf("failure %d: %d", i, status)
		}
	}
	if status, d, _ := a.ask("login", "kim", "192.0.2.80", "new-phone"); status != 200 || d.Decision != "challenge" {
		t.Fatalf("a new device in attack mode: %d %+v, want challenge", status, d)
	}
}

// TestAttemptLimitedDeviceQueriesNothing: an attempt its network's limit
// is known to refuse costs no Postgres query, whatever device id it names.
// The device id is the application's client's (a cookie, as the security
// model advises), so a client over its limit that sends a fresh id each
// time must not reach the database: the table of devices is locked here,
// and a query for it would wait on that lock instead of answering 429.
//
// "Known" is the replica's memory of rejections (XCLOAK_REJECTION_MEMORY,
// set long here so that it outlasts the test): the first rejection comes
// from Redis, and the memory learns it. So one plain over-limit attempt,
// without a device, is sent first; every attempt with a fresh device id
// after it must be refused without a lookup.
func TestAttemptLimitedDeviceQueriesNothing(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.Limits.SetCount(auth.RuleLoginIP, 1)
		c.RejectionMemory = time.Hour
	}})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	if status, d, _ := a.ask("login", "mallory", "192.0.2.90", "cookie-0"); status != 200 {
		t.Fatalf("first attempt: %d %+v, want 200", status, d)
	}
	if status, d, _ := a.ask("login", "mallory", "192.0.2.90", ""); status != 429 {
		t.Fatalf("an attempt over its network's limit, without a device: %d %+v, want 429", status, d)
	}
	freshDevicesRefusedWithoutLookup(t, env, a, "mallory", "192.0.2.90", "cookie", 5)
}

// freshDevicesRefusedWithoutLookup sends n attempts for account from
// clientIP, each with a device id never seen (prefix-1, prefix-2, ...), with
// the table of devices locked: each must be answered 429, and none may
// wait on the lock, as a lookup of its device would.
func freshDevicesRefusedWithoutLookup(t *testing.T, env *xcloaktest.Env, a *app, account, clientIP, prefix string, n int) {
	t.Helper()
	tx, err := env.DB.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), `LOCK TABLE app_devices IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		for i := 1; i <= n; i++ {
			body, _ := json.Marshal(map[string]string{"kind": "login", "account": account, "client_ip": clientIP,
				"device": fmt.Sprintf("%s-%d", prefix, i)})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, a.base+"/api/v1/attempts", bytes.NewReader(body))
			req.Header.Set("Content-Type", jsonType)
			req.Header.Set("Authorization", "Bearer "+a.key)
			resp, err := a.c.Do(req)
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 429 || i == n {
				done <- resp.StatusCode
				return
			}
		}
	}()
	for {
		select {
		case status := <-done:
			if status != 429 {
				t.Fatalf("an attempt with a fresh device id: %d, want 429", status)
			}
			return
		default:
		}
		// The device lookup only: the janitor's first sweep, which
		// deletes old rows of the same table, may be waiting too.
		var waiting int
		if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'SELECT EXISTS (SELECT 1 FROM app_devices %'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			tx.Rollback(t.Context())
			t.Fatalf("an attempt with a fresh device id queried Postgres for it (answered %d once the table was free)", <-done)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAttemptFreshDevicesOnALockedAccountSpendTheNetwork: attempts for a
// locked account, each with a device id never seen, each cost a lookup
// that finds no device, and the lock refuses them before the network's
// rules count anything: each such lookup is counted by them, so that a
// key's holder sending a fresh id each time is refused before it costs
// more queries than the client's network allows, and then costs none
// (the memory of rejections set long, as in
// TestAttemptLimitedDeviceQueriesNothing).
func TestAttemptFreshDevicesOnALockedAccountSpendTheNetwork(t *testing.T) {
	const perAddress = 5
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.Limits.SetCount(auth.RuleLoginAccount, 100)
		c.Limits.SetCount(auth.RuleLoginIP, perAddress)
		c.RejectionMemory = time.Hour
	}})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	for i := range env.Auth.Lockout.Threshold {
		_, d, _ := a.ask("login", "mallory", fmt.Sprintf("203.0.113.%d", 140+i), "")
		if status, _ := a.outcome(d.AttemptID, "failure"); status != 204 {
			t.Fatalf("failure %d: %d", i, status)
		}
	}
	for i := range 3 * perAddress {
		if status, d, _ := a.ask("login", "mallory", "192.0.2.91", fmt.Sprintf("fresh-%d", i)); status != 429 {
			t.Fatalf("attempt %d on the locked account with a fresh device: %d %+v, want 429", i, status, d)
		}
	}
	if status, d, _ := a.ask("login", "ann", "192.0.2.91", ""); status != 429 {
		t.Errorf("another account's attempt from the client after %d fresh devices looked up: %d %+v, want 429 by its limit of %d",
			3*perAddress, status, d, perAddress)
	}
	freshDevicesRefusedWithoutLookup(t, env, a, "mallory", "192.0.2.91", "fresher", 5)
}

// TestAttemptResetOutcomeEndsLockout: a reset the application reports as
// completed ends the account's lockout, as a reset completed on XCloak's
// own page does, so that an owner whom guesses locked out and who has just
// reset the password is let in from a new device.
func TestAttemptResetOutcomeEndsLockout(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	for i := range env.Auth.Lockout.Threshold {
		_, d, _ := a.ask("login", "nora", fmt.Sprintf("203.0.113.%d", i), "")
		if status, _ := a.outcome(d.AttemptID, "failure"); status != 204 {
			t.Fatalf("failure %d: %d", i, status)
		}
	}
	if status, d, _ := a.ask("login", "nora", "198.51.100.30", "new-laptop"); status != 429 || d.Reason != "locked" {
		t.Fatalf("after the failures: %d %+v, want 429 locked", status, d)
	}
	status, d, _ := a.ask("reset", "nora", "198.51.100.30", "")
	if status != 200 {
		t.Fatalf("reset request: %d %+v, want 200", status, d)
	}
	if status, _ := a.outcome(d.AttemptID, "success"); status != 204 {
		t.Fatalf("reset completed: %d, want 204", status)
	}
	if status, d, _ := a.ask("login", "nora", "198.51.100.30", "new-laptop"); status != 200 {
		t.Fatalf("after a completed reset: %d %+v, want the lockout ended", status, d)
	}
	var listed int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM lockouts WHERE account_key = 'app shop nora' AND cleared_at IS NULL`).Scan(&listed); err != nil {
		t.Fatal(err)
	}
	if listed != 0 {
		t.Fatalf("the lockout log still lists %d lockouts of app shop nora in force", listed)
	}
}

// TestAttemptResetForgetsKnownDevices: a reset the application reports
// completed forgets the account's known devices, as a password changed on
// XCloak's own page does, so that a device that signed in with a stolen
// password is no longer waved past the lockout and the challenges once the
// owner has reset it.
func TestAttemptResetForgetsKnownDevices(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	_, d, _ := a.ask("login", "olga", "203.0.113.66", "thiefs-box")
	a.succeeded(d.AttemptID, "the thief's sign-in")
	_, d, _ = a.ask("reset", "olga", "198.51.100.31", "")
	a.succeeded(d.AttemptID, "the owner's reset")
	env.Flush(t)
	var forgotten string
	if err := env.DB.QueryRow(t.Context(), `SELECT coalesce(detail->>'devices_forgotten', '') FROM security_events
		WHERE kind = 'reset_completed' AND account_key = 'app shop olga'`).Scan(&forgotten); err != nil || forgotten != "1" {
		t.Fatalf("the reset's event: devices_forgotten %q %v, want 1", forgotten, err)
	}
	a.decidedInAttack(env, "olga", "203.0.113.66", "thiefs-box", "challenge", "the thief's device after the owner's reset")
}

// TestAttemptResetNotSpentWhenDevicesStayKnown: a completed reset whose
// known devices cannot be forgotten (Postgres refuses) is answered 503
// and its id is not spent, so that the application reports it again and
// the devices are forgotten then; a 204 would tell it the thief's device
// was forgotten while it stayed known, with no id left to report again.
func TestAttemptResetNotSpentWhenDevicesStayKnown(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	_, d, _ := a.ask("login", "pia", "203.0.113.67", "thiefs-box")
	a.succeeded(d.AttemptID, "the thief's sign-in")
	_, reset, _ := a.ask("reset", "pia", "198.51.100.32", "")
	for _, sql := range []string{
		`CREATE FUNCTION refuse_reset() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$`,
		`CREATE TRIGGER refuse_reset BEFORE INSERT OR UPDATE ON app_account_resets FOR EACH ROW EXECUTE FUNCTION refuse_reset()`,
	} {
		if _, err := env.DB.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	if status, got := a.outcome(reset.AttemptID, "success"); status != 503 || got.Error != "unavailable" {
		t.Fatalf("the owner's reset, its devices not forgotten: %d %+v, want 503 unavailable", status, got)
	}
	if _, err := env.DB.Exec(t.Context(), `DROP TRIGGER refuse_reset ON app_account_resets`); err != nil {
		t.Fatal(err)
	}
	a.succeeded(reset.AttemptID, "the owner's reset reported again")
	if status, got := a.outcome(reset.AttemptID, "success"); status != 404 {
		t.Fatalf("the reset reported a third time: %d %+v, want 404", status, got)
	}
	env.Flush(t)
	var events int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM security_events
		WHERE kind = 'reset_completed' AND account_key = 'app shop pia' AND detail->>'devices_forgotten' = '1'`).Scan(&events); err != nil || events != 1 {
		t.Fatalf("reset_completed events forgetting one device: %d %v, want 1", events, err)
	}
	a.decidedInAttack(env, "pia", "203.0.113.67", "thiefs-box", "challenge", "the thief's device after the owner's reset")
}

// TestAttemptResetOutlivesAnEarlierSuccess: a sign-in the thief's device
// asked for before the owner's reset, reported a success only after it
// (its password was still the old one when checked), does not make the
// device known again: what the reset forgot stays forgotten.
func TestAttemptResetOutlivesAnEarlierSuccess(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	_, d, _ := a.ask("login", "olga", "203.0.113.66", "thiefs-box")
	a.succeeded(d.AttemptID, "the thief's sign-in")
	_, inFlight, _ := a.ask("login", "olga", "203.0.113.66", "thiefs-box")
	_, r, _ := a.ask("reset", "olga", "198.51.100.31", "")
	a.succeeded(r.AttemptID, "the owner's reset")
	a.succeeded(inFlight.AttemptID, "the sign-in asked before the reset, reported after it")
	a.decidedInAttack(env, "olga", "203.0.113.66", "thiefs-box", "challenge", "the thief's device after the owner's reset")
}

// TestAttemptSignInJustAfterResetIsRemembered: a sign-in decided after the
// account's reset, in the same second, makes its device known: the reset
// forgets only what came before it.
func TestAttemptSignInJustAfterResetIsRemembered(t *testing.T) {
	clk := &clock{t: time.Now().Truncate(time.Second).Add(100 * time.Millisecond)}
	env := xcloaktest.New(t, xcloaktest.Options{Now: clk.Now})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	_, r, _ := a.ask("reset", "olga", "198.51.100.31", "")
	clk.Advance(200 * time.Millisecond)
	a.succeeded(r.AttemptID, "the reset")
	clk.Advance(300 * time.Millisecond)
	_, d, _ := a.ask("login", "olga", "198.51.100.31", "owners-laptop")
	a.succeeded(d.AttemptID, "the sign-in")
	clk.Advance(time.Minute)
	a.decidedInAttack(env, "olga", "198.51.100.31", "owners-laptop", "allow", "the owner's device, signed in just after the reset")
}

// TestAttemptDevicesCapped: an application's account keeps at most
// XCLOAK_MAX_DEVICES known devices, as XCloak's own do, forgetting the
// least recently used, so that an account's devices cannot grow without
// bound and the oldest is challenged again.
func TestAttemptDevicesCapped(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.MaxDevices = 2 }})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	for _, device := range []string{"phone", "laptop", "tablet"} {
		_, d, _ := a.ask("login", "quinn", "203.0.113.70", device)
		if status, _ := a.outcome(d.AttemptID, "success"); status != 204 {
			t.Fatalf("sign-in from %s: %d", device, status)
		}
	}
	if _, err := env.Attack.SwitchAttack(t.Context(), true, "test"); err != nil {
		t.Fatal(err)
	}
	for device, want := range map[string]string{"phone": "challenge", "laptop": "allow", "tablet": "allow"} {
		if status, d, _ := a.ask("login", "quinn", "203.0.113.70", device); status != 200 || d.Decision != want {
			t.Errorf("%s, in attack mode, with 2 devices kept: %d %+v, want %s", device, status, d, want)
		}
	}
}

// TestAttemptsInvisibleCharactersCountAlike: an account with invisible
// characters added (a zero-width space, a word joiner, a soft hyphen, a
// byte order mark) looks like the account and counts as it, so that they
// are no fresh quota for guesses at it: an application whose lookup
// ignores them (as collations commonly do) would otherwise let each
// variant guess at the same user under a limit of its own.
func TestAttemptsInvisibleCharactersCountAlike(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 2) }})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	for i, account := range []string{"pat", "pa\u200bt"} {
		if status, d, _ := a.ask("login", account, fmt.Sprintf("192.0.2.%d", 100+i), ""); status != 200 {
			t.Fatalf("attempt %d: %d %+v, want 200", i, status, d)
		}
	}
	for _, account := range []string{"p\u2060at", "pat\u00ad", "\ufeffpat", "pat\u200b"} {
		if status, d, _ := a.ask("login", account, "192.0.2.110", ""); status != 429 {
			t.Errorf("%+q after pat's limit: %d %+v, want 429, counted as pat", account, status, d)
		}
	}
}

// TestAttemptLookAlikeAccountRelaxesNothing: spellings the application
// may tell apart (a zero-width space, another case) count towards one
// account's limits, which only makes them stricter, but the owner of one
// relaxes nothing of another's: a device that signed in as the look-alike
// is not known for the account, and the look-alike's devices push none of
// the owner's out. Otherwise whoever registers a look-alike where the
// application allows one could make any number of devices known for the
// victim, each exempt from the account's limit and lockout and never
// challenged. A reset, which only forgets, forgets the devices of every
// spelling (TestAttemptResetUnderAnotherSpellingForgetsDevices): the
// look-alike's costs the owner a challenge.
func TestAttemptLookAlikeAccountRelaxesNothing(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.MaxDevices = 2 }})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	_, d, _ := a.ask("login", "alice", "198.51.100.40", "owners-laptop")
	a.succeeded(d.AttemptID, "the owner's sign-in")
	for i, lookAlike := range []string{"ali\u200bce", "Alice", "ali\u200bce"} {
		_, d, _ := a.ask("login", lookAlike, "203.0.113.80", fmt.Sprintf("box-%d", i))
		a.succeeded(d.AttemptID, fmt.Sprintf("the look-alike %+q's sign-in from box-%d", lookAlike, i))
	}
	a.decidedInAttack(env, "alice", "203.0.113.80", "box-2", "challenge", "alice from the look-alike's device")
	a.decidedInAttack(env, "alice", "198.51.100.40", "owners-laptop", "allow", "alice from her own device")
	a.decidedInAttack(env, "ali\u200bce", "203.0.113.80", "box-2", "allow", "the look-alike from its own device")
	_, r, _ := a.ask("reset", "ali\u200bce", "203.0.113.80", "")
	a.succeeded(r.AttemptID, "the look-alike's reset")
	a.decidedInAttack(env, "alice", "198.51.100.40", "owners-laptop", "challenge", "alice from her own device after the look-alike's reset")
	a.decidedInAttack(env, "ali\u200bce", "203.0.113.80", "box-2", "challenge", "the look-alike from its own device after its reset")
}

// TestAttemptResetUnderAnotherSpellingForgetsDevices: forgetting only
// makes things stricter, so a completed reset forgets the known devices
// of every spelling that folds alike, as the limits count them alike: an
// application that sends what its users type, in whatever case, forgets
// the thief's device signed in as "Olga" when the owner resets as
// "olga", and a sign-in under one spelling decided before the reset of
// another and reported after it makes no device known.
func TestAttemptResetUnderAnotherSpellingForgetsDevices(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	_, d, _ := a.ask("login", "Olga", "203.0.113.66", "thiefs-box")
	a.succeeded(d.AttemptID, "the thief's sign-in as Olga")
	_, inFlight, _ := a.ask("login", "OLGA", "203.0.113.66", "thiefs-other-box")
	_, r, _ := a.ask("reset", "olga", "198.51.100.31", "")
	a.succeeded(r.AttemptID, "the owner's reset as olga")
	a.succeeded(inFlight.AttemptID, "a sign-in as OLGA asked before the reset, reported after it")
	a.decidedInAttack(env, "Olga", "203.0.113.66", "thiefs-box", "challenge", "the thief's device after the owner's reset")
	a.decidedInAttack(env, "OLGA", "203.0.113.66", "thiefs-other-box", "challenge", "the other device after the owner's reset")
}

// TestKeyRotationKeepsTheApplication: a key made for an application
// that has one (apikey add --app) speaks for the same accounts: the
// lockout, the known devices and the limits made under the old key hold
// under the new one, while both are in force and once the old one is
// revoked. A key of another name alone would start the application
// afresh, its accounts unlocked and its owners' devices forgotten.
func TestKeyRotationKeepsTheApplication(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	base := env.Start(t)
	old := newApp(t, base, env.AddAPIKey(t, "shop"))
	// The owner's laptop becomes a known device, which the account's
	// lockout does not lock.
	_, d, _ := old.ask("login", "carol", "198.51.100.7", "laptop-1")
	old.outcome(d.AttemptID, "success")
	for i := range env.Auth.Lockout.Threshold {
		_, d, _ := old.ask("login", "carol", fmt.Sprintf("203.0.113.%d", i), "")
		old.outcome(d.AttemptID, "failure")
	}
	if _, d, _ := old.ask("login", "carol", "203.0.113.200", ""); d.Reason != "locked" {
		t.Fatalf("carol after the failures: %+v, want locked", d)
	}

	if _, d, _ := old.ask("login", "carol", "198.51.100.7", "laptop-1"); d.Decision != "allow" {
		t.Fatalf("the old key: carol's laptop %+v, want allow (a known device)", d)
	}
	key, info, err := env.Service.AddAPIKeyFor(t.Context(), "shop-2", "shop", "cli")
	if err != nil || info.App != "shop" || info.Name != "shop-2" {
		t.Fatalf("AddAPIKeyFor(shop-2, shop): %+v %v", info, err)
	}
	rotated := newApp(t, base, key)
	for _, revoked := range []bool{false, true} {
		if revoked {
			if err := env.Service.RevokeAPIKey(t.Context(), "shop", "cli"); err != nil {
				t.Fatal(err)
			}
		}
		if _, d, _ := rotated.ask("login", "carol", "203.0.113.201", ""); d.Reason != "locked" {
			t.Errorf("the new key, the old one revoked %v: carol %+v, want locked", revoked, d)
		}
		if _, d, _ := rotated.ask("login", "carol", "198.51.100.7", "laptop-1"); d.Decision != "allow" {
			t.Errorf("the new key, the old one revoked %v: carol's laptop %+v, want allow (a known device)", revoked, d)
		}
	}
	if _, _, err := env.Service.AddAPIKeyFor(t.Context(), "blog", "no-such-app", "cli"); !errors.Is(err, auth.ErrNoApp) {
		t.Errorf("a key for an application that has none: %v, want ErrNoApp", err)
	}
}

// TestAttemptReportedByTheKeyThatReplacedIt: an attempt asked for under
// one key of an application is reported by another of its keys, the one
// that replaced it once it is revoked included: a reset asked for before
// a rotation and completed after it still ends its account's lock, where
// the new key's report was refused and the account stayed locked. Another
// application's key is refused as before, and spends nothing.
func TestAttemptReportedByTheKeyThatReplacedIt(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	base := env.Start(t)
	old := newApp(t, base, env.AddAPIKey(t, "shop"))
	blog := newApp(t, base, env.AddAPIKey(t, "blog"))
	for i := range env.Auth.Lockout.Threshold {
		_, d, _ := old.ask("login", "carol", fmt.Sprintf("203.0.113.%d", i), "")
		old.outcome(d.AttemptID, "failure")
	}
	_, reset, _ := old.ask("reset", "carol", "198.51.100.9", "")
	_, login, _ := old.ask("login", "dave", "198.51.100.9", "")
	if reset.AttemptID == "" || login.AttemptID == "" {
		t.Fatalf("attempts before the rotation: %+v %+v", reset, login)
	}
	key, _, err := env.Service.AddAPIKeyFor(t.Context(), "shop-2", "shop", "cli")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Service.RevokeAPIKey(t.Context(), "shop", "cli"); err != nil {
		t.Fatal(err)
	}
	rotated := newApp(t, base, key)
	for name, id := range map[string]string{"reset": reset.AttemptID, "sign-in": login.AttemptID} {
		if status, d := blog.outcome(id, "success"); status != http.StatusNotFound {
			t.Errorf("another application's report of shop's %s: %d %+v, want 404", name, status, d)
		}
		if status, d := rotated.outcome(id, "success"); status != http.StatusNoContent {
			t.Errorf("the new key's report of the %s asked under the old: %d %+v, want 204", name, status, d)
		}
	}
	if _, d, _ := rotated.ask("login", "carol", "203.0.113.200", ""); d.Decision != "allow" {
		t.Errorf("carol after her reset, reported by the new key: %+v, want allow", d)
	}
}

// TestAttemptEventsNameTheKey: while two keys speak for one application
// (a rotation), the events of each one's attempts name the key as well as
// the application, so that an administrator can tell which key to revoke
// when one misbehaves; a key of the application's own name adds nothing.
func TestAttemptEventsNameTheKey(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) }})
	base := env.Start(t)
	old := newApp(t, base, env.AddAPIKey(t, "shop"))
	key, _, err := env.Service.AddAPIKeyFor(t.Context(), "shop-2", "shop", "cli")
	if err != nil {
		t.Fatal(err)
	}
	rotated := newApp(t, base, key)
	for account, a := range map[string]*app{"old": old, "rotated": rotated} {
		_, d, _ := a.ask("login", account, "192.0.2.31", "pc")
		a.outcome(d.AttemptID, "failure")
		_, d, _ = a.ask("login", account, "192.0.2.31", "pc")
		a.succeeded(d.AttemptID, account)
		_, d, _ = a.ask("reset", account, "192.0.2.31", "")
		a.succeeded(d.AttemptID, account+"'s reset")
		// And a lockout, whose event the failure that locked records.
		for i := range env.Auth.Lockout.Threshold {
			_, d, _ := a.ask("login", account, fmt.Sprintf("203.0.113.%d", 120+i), "")
			a.outcome(d.AttemptID, "failure")
		}
	}
	env.Flush(t)
	rows, err := env.DB.Query(t.Context(), `SELECT kind, account_key, detail->>'app', coalesce(detail->>'key', '')
		FROM security_events WHERE account_key LIKE 'app %'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var kind, account, appName, keyName string
		if err := rows.Scan(&kind, &account, &appName, &keyName); err != nil {
			t.Fatal(err)
		}
		n++
		want := ""
		if account == "app shop rotated" {
			want = "shop-2"
		}
		if appName != "shop" || keyName != want {
			t.Errorf("%s of %s: app %q key %q, want app shop key %q", kind, account, appName, keyName, want)
		}
	}
	if n < 14 {
		t.Fatalf("%d events of the applications' accounts, want at least 14", n)
	}
}

// TestAttemptIDOfTheLongestAccounts: the id of an attempt for any account
// the API takes, the longest with a device and an IPv6 address included,
// is taken by its outcome: an account whose id were refused would have
// its failures never counted towards its lockout. encoding/json writes
// '<', '>' and '&' as six bytes each, and U+2028 as six for its three.
func TestAttemptIDOfTheLongestAccounts(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	device := strings.Repeat("d", auth.MaxDeviceBytes)
	for i, account := range []string{
		strings.Repeat("&", auth.MaxAccountBytes),
		strings.Repeat("<>", auth.MaxAccountBytes/2),
		strings.Repeat("\u2028", auth.MaxAccountBytes/3) + "x",
		strings.Repeat("é", auth.MaxAccountBytes/2),
	} {
		clientIP := fmt.Sprintf("2001:db8:ffff:ffff:ffff:ffff:ffff:%x", 0xff00+i)
		status, d, _ := a.ask("login", account, clientIP, device)
		if status != 200 {
			t.Fatalf("account %d: %d %+v, want 200", i, status, d)
		}
		if status, got := a.outcome(d.AttemptID, "failure"); status != 204 {
			t.Errorf("account %d (an id of %d bytes): outcome %d %+v, want 204", i, len(d.AttemptID), status, got)
		}
	}
}

// TestAttemptsCountTranslatedIPv4ByItsAddress: an application behind a
// NAT64 or SIIT translator sees its IPv4 users under the well-known
// 64:ff9b::/96, or under its operator's own prefix listed in
// XCLOAK_NAT64_PREFIXES. Each is counted as the IPv4 address it embeds,
// together with its attempts over IPv4, and not with every other user of
// the translator in one IPv6 /64.
func TestAttemptsCountTranslatedIPv4ByItsAddress(t *testing.T) {
	for _, tt := range []struct {
		name     string
		prefixes []netip.Prefix
		// user and other are 192.0.2.33 and 198.51.100.1 through the
		// translator.
		user, other string
	}{
		{"the well-known prefix", nil, "64:ff9b::192.0.2.33", "64:ff9b::198.51.100.1"},
		// RFC 6052's example of a /48.
		{"the operator's prefix", []netip.Prefix{netip.MustParsePrefix("2001:db8:122::/48")},
			"2001:db8:122:c000:2:2100::", "2001:db8:122:c633:6401::"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := xcloaktest.New(t, xcloaktest.Options{
				Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginIP, 2) },
				Web:  func(c *web.Config) { c.NAT64Prefixes = tt.prefixes },
			})
			a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
			for i, ip := range []string{tt.user, "192.0.2.33"} {
				if status, d, _ := a.ask("login", fmt.Sprintf("user%d", i), ip, ""); status != 200 || d.Decision != "allow" {
					t.Fatalf("%s: %d %+v, want 200 allow", ip, status, d)
				}
			}
			if status, d, _ := a.ask("login", "user2", tt.user, ""); status != 429 || d.Decision != "deny" {
				t.Fatalf("a third attempt of 192.0.2.33 through the translator: %d %+v, want 429 deny", status, d)
			}
			if status, d, _ := a.ask("login", "user3", tt.other, ""); status != 200 || d.Decision != "allow" {
				t.Fatalf("another IPv4 user through the translator: %d %+v, want 200 allow", status, d)
			}
		})
	}
}

// TestAttemptDevicesNewJustBeforeAttackAreForgotten: the applications'
// devices first seen in the moments before attack mode started (a
// stuffing run's right passwords, reported as successes before the
// detector tripped) are forgotten as XCloak's own browsers are signed
// out: their next attempts in attack mode are challenged. A device known
// from before stays known.
func TestAttemptDevicesNewJustBeforeAttackAreForgotten(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	_, d, _ := a.ask("login", "ann", "198.51.100.40", "anns-laptop")
	a.succeeded(d.AttemptID, "the owner's sign-in")
	since := time.Now()
	_, d, _ = a.ask("login", "ann", "203.0.113.40", "stuffers-box")
	a.succeeded(d.AttemptID, "the stuffer's right password")
	// What attack mode's start does on the replica that records it.
	if _, err := env.Service.SignOutNewDevices(t.Context(), since, nil); err != nil {
		t.Fatal(err)
	}
	a.decidedInAttack(env, "ann", "203.0.113.40", "stuffers-box", "challenge", "the device first seen just before the start")
	a.decidedInAttack(env, "ann", "198.51.100.40", "anns-laptop", "allow", "the device known from before")
}

// TestAttemptSuccessAfterAttackStartsKeepsDeviceNew: a new device's
// attempt decided before attack mode started, whose success is reported
// after it, was let go unchallenged; its device is not made known, so
// its next attempt is challenged.
func TestAttemptSuccessAfterAttackStartsKeepsDeviceNew(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	status, d, _ := a.ask("login", "bob", "203.0.113.41", "stuffers-box")
	if status != 200 || d.Decision != "allow" {
		t.Fatalf("before attack mode: %d %+v, want allow", status, d)
	}
	if _, err := env.Attack.SwitchAttack(t.Context(), true, "test"); err != nil {
		t.Fatal(err)
	}
	a.succeeded(d.AttemptID, "the success reported once attack mode is on")
	a.decidedInAttack(env, "bob", "203.0.113.41", "stuffers-box", "challenge", "the device of that success")
}

// TestAttemptKnownDecisionAcrossAttackStartStaysForgotten: a device
// decided known just before attack mode started, and forgotten by the
// start (first seen in the moments before it), is not made known again by
// that attempt's success reported after the start: its next attempt is
// challenged.
func TestAttemptKnownDecisionAcrossAttackStartStaysForgotten(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	a := newApp(t, env.Start(t), env.AddAPIKey(t, "shop"))
	since := time.Now()
	_, d, _ := a.ask("login", "cleo", "203.0.113.42", "stuffers-box")
	a.succeeded(d.AttemptID, "the stuffer's right password")
	status, d, _ := a.ask("login", "cleo", "203.0.113.42", "stuffers-box")
	if status != 200 || d.Decision != "allow" {
		t.Fatalf("the device, known: %d %+v, want allow", status, d)
	}
	if _, err := env.Service.SignOutNewDevices(t.Context(), since, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Attack.SwitchAttack(t.Context(), true, "test"); err != nil {
		t.Fatal(err)
	}
	a.succeeded(d.AttemptID, "the success of the attempt decided known, reported after the start")
	a.decidedInAttack(env, "cleo", "203.0.113.42", "stuffers-box", "challenge", "the forgotten device")
}
