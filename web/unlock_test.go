package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

var unlockLink = regexp.MustCompile(`https://login\.example\.test/unlock/([A-Za-z0-9_-]{43})`)

// unlockToken asks for an unlock link for email from a browser of its own
// and returns the token mailed.
func unlockToken(t *testing.T, env *xcloaktest.Env, base, source, email string) string {
	t.Helper()
	form := url.Values{"email": {email}}.Encode()
	if resp, _ := post(t, xcloaktest.Client(t, source), base+"/unlock", formType, form); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("unlock request: %d", resp.StatusCode)
	}
	m := unlockLink.FindStringSubmatch(env.Mail.WaitFor(t, email).Body)
	if m == nil {
		t.Fatal("no unlock link in the mail")
	}
	return m[1]
}

// TestUnlockRequestAnswersAlike: asking for an unlock link gets the same
// status, body and cookies for an unknown account, an account that is not
// locked and a locked one, from the page and from the API; the mail goes
// to the existing accounts only. The unknown address is asked for first,
// so that a worker that mailed it would be caught.
func TestUnlockRequestAnswersAlike(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "open@example.com", "the password", false)
	env.AddUser(t, "locked@example.com", "the password", false)
	lockAccount(t, env, base, "127.0.10.100", "locked@example.com")

	type answer struct {
		status  int
		body    string
		cookies string
	}
	ask := func(i int, email string, api bool) answer {
		c := xcloaktest.Client(t, fmt.Sprintf("127.0.10.%d", i+1))
		var resp *http.Response
		var body string
		if api {
			resp, body = post(t, c, base+"/api/v1/unlock", jsonType, fmt.Sprintf(`{"email":%q}`, email))
		} else {
			resp, body = post(t, c, base+"/unlock", formType, url.Values{"email": {email}}.Encode())
		}
		return answer{resp.StatusCode, body, strings.Join(resp.Header.Values("Set-Cookie"), "|")}
	}
	for _, api := range []bool{false, true} {
		offset := 0
		if api {
			offset = 10
		}
		var answers []answer
		for i, email := range []string{"nobody@example.com", "open@example.com", "locked@example.com"} {
			answers = append(answers, ask(offset+i, email, api))
		}
		if answers[0].status != http.StatusAccepted {
			t.Fatalf("api=%v: status %d, want 202", api, answers[0].status)
		}
		for i, a := range answers[1:] {
			if a != answers[0] {
				t.Fatalf("api=%v: answer %d differs from the unknown account's:\n%+v\n%+v", api, i+1, a, answers[0])
			}
		}
		if api && strings.TrimSpace(answers[0].body) != `{"status":"accepted"}` {
			t.Fatalf("API answer: %s", answers[0].body)
		}
	}
	for range 2 {
		env.Mail.WaitFor(t, "open@example.com")
		env.Mail.WaitFor(t, "locked@example.com")
	}
	for _, m := range env.Mail.Messages() {
		for _, to := range m.To {
			if strings.EqualFold(to, "nobody@example.com") {
				t.Fatal("an unlock link was mailed to an address without an account")
			}
		}
	}
}

// TestUnlockLinkLetsOwnerIn: while an attacker holds the account locked,
// the owner asks for a link from a fresh browser. Opening it (GET) only
// shows a button and spends nothing; confirming it (POST) makes that
// browser a known device, which then signs in, while the attacker's next
// attempt is still 429 with a Retry-After that did not shrink. The link
// works once.
func TestUnlockLinkLetsOwnerIn(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	lockAccount(t, env, base, "127.0.10.50", "ann@example.com")
	attacker := xcloaktest.Client(t, "127.0.10.50")

	owner := xcloaktest.Client(t, "127.0.10.51")
	if resp, _ := post(t, owner, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "the password")); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("owner's fresh browser during the lockout: %d, want 429", resp.StatusCode)
	}
	if _, body := get(t, owner, base+"/login"); !strings.Contains(body, `href="/unlock"`) {
		t.Fatal("the sign-in page does not offer an unlock link")
	}
	token := unlockToken(t, env, base, "127.0.10.52", "ann@example.com")
	page := base + "/unlock/" + token
	for range 2 {
		resp, body := get(t, owner, page)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "<button") || len(resp.Cookies()) != 0 {
			t.Fatalf("opening the link: %d, cookies %v\n%s", resp.StatusCode, resp.Cookies(), body)
		}
	}
	resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "guess"))
	before, _ := strconv.Atoi(resp.Header.Get("Retry-After"))

	resp, _ = post(t, owner, page, formType, "")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Fatalf("confirming the link: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if deviceCookie(t, env, owner, base, "ann@example.com") == "" {
		t.Fatal("confirming the link set no device cookie")
	}
	signIn(t, owner, base, "ann@example.com", "the password")

	resp, _ = post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "the password"))
	after, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || after < before-1 {
		t.Fatalf("attacker after the owner came in: %d, Retry-After %d (was %d); want 429 and no shorter", resp.StatusCode, after, before)
	}
	if resp, body := post(t, xcloaktest.Client(t, "127.0.10.53"), page, formType, ""); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "invalid or has expired") {
		t.Fatalf("second use of the link: %d", resp.StatusCode)
	}
}

// TestUnlockLinkWorksOnceUnderRace: several browsers confirm one link at
// once; exactly one becomes a known device.
func TestUnlockLinkWorksOnceUnderRace(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	token := unlockToken(t, env, base, "127.0.10.60", "ann@example.com")

	const n = 8
	statuses := make([]int, n)
	cookies := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		c := xcloaktest.Client(t, fmt.Sprintf("127.0.10.%d", 61+i))
		wg.Go(func() {
			<-start
			resp, _ := post(t, c, base+"/api/v1/unlock/confirm", jsonType, fmt.Sprintf(`{"token":%q}`, token))
			statuses[i], cookies[i] = resp.StatusCode, len(resp.Cookies())
		})
	}
	close(start)
	wg.Wait()
	ok := 0
	for i, s := range statuses {
		switch {
		case s == http.StatusOK && cookies[i] == 1:
			ok++
		case s == http.StatusBadRequest && cookies[i] == 0:
		default:
			t.Fatalf("confirmation %d: %d with %d cookies", i, s, cookies[i])
		}
	}
	if ok != 1 {
		t.Fatalf("%d confirmations of one link succeeded, want exactly 1 (%v)", ok, statuses)
	}
	var devices int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM devices`).Scan(&devices); err != nil || devices != 1 {
		t.Fatalf("%d known devices (%v), want 1", devices, err)
	}
}

// TestUnlockLinkExpires: a link past its lifetime is refused on both the
// page and the API, and adds no device.
func TestUnlockLinkExpires(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.UnlockTTL = 5 * 60e9 }})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	token := unlockToken(t, env, base, "127.0.10.80", "ann@example.com")
	var ttl float64
	if err := env.DB.QueryRow(t.Context(), `SELECT extract(epoch FROM expires_at - created_at) FROM unlock_tokens`).Scan(&ttl); err != nil || ttl != 300 {
		t.Fatalf("link lifetime %vs (%v), want the configured 300s", ttl, err)
	}
	if _, err := env.DB.Exec(t.Context(), `UPDATE unlock_tokens SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	c := xcloaktest.Client(t, "127.0.10.81")
	if resp, body := get(t, c, base+"/unlock/"+token); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "invalid or has expired") {
		t.Fatalf("opening an expired link: %d", resp.StatusCode)
	}
	if resp, _ := post(t, c, base+"/api/v1/unlock/confirm", jsonType, fmt.Sprintf(`{"token":%q}`, token)); resp.StatusCode != http.StatusBadRequest || len(resp.Cookies()) != 0 {
		t.Fatalf("confirming an expired link: %d", resp.StatusCode)
	}
}

// TestUnlockRequestsLimited: one network asking for more links than its
// limit gets 429 with Retry-After, and the dashboard counts the rejection
// under the unlock rule.
func TestUnlockRequestsLimited(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	c := xcloaktest.Client(t, "127.0.10.90")
	for i := range env.Auth.Limits[auth.RuleUnlockIP].Count {
		if resp, _ := post(t, c, base+"/api/v1/unlock", jsonType, fmt.Sprintf(`{"email":"x%d@example.com"}`, i)); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	resp, body := post(t, c, base+"/api/v1/unlock", jsonType, `{"email":"y@example.com"}`)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, `"retry_after_seconds":`) {
		t.Fatalf("past the limit: %d %s", resp.StatusCode, body)
	}
	env.Flush(t)
	admin := xcloaktest.Client(t, "127.0.10.91")
	signIn(t, admin, base, adminEmail, anyPassword)
	if s, _ := getStats(t, admin, base, "5m"); s.RejectedByRule[auth.RuleUnlockIP] != 1 {
		t.Fatalf("rejected by rule: %v, want one %s", s.RejectedByRule, auth.RuleUnlockIP)
	}
	if _, page := get(t, admin, base+"/admin"); !strings.Contains(page, "Unlock-link requests per address") {
		t.Fatal("the dashboard does not name the unlock rule")
	}
}
