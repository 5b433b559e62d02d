package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/breached"
	"github.com/xcloak/xcloak/breached/breachedtest"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// heldJSON signs in through the API, expecting to be held, and returns the
// held answer's mfa_token.
func heldJSON(t *testing.T, c *http.Client, base, email, password string) string {
	t.Helper()
	resp, body := post(t, c, base+"/api/v1/login", jsonType, loginJSON(email, password))
	var got map[string]string
	if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != http.StatusAccepted ||
		got["status"] != "verification_required" || got["mfa_token"] == "" || len(got) != 2 {
		t.Fatalf("held sign-in: %d %s; want 202 verification_required with an mfa_token", resp.StatusCode, body)
	}
	return got["mfa_token"]
}

// keepBinding returns a function that gives c back the binding cookie it
// has now, which a finished step clears: a replay sends it again.
func keepBinding(t *testing.T, c *http.Client, base string) func() {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var kept []*http.Cookie
	for _, ck := range c.Jar.Cookies(u) {
		if strings.HasSuffix(ck.Name, "xcloak_mfa") {
			kept = append(kept, &http.Cookie{Name: ck.Name, Value: ck.Value, Path: "/"})
		}
	}
	if len(kept) != 1 {
		t.Fatalf("binding cookies: %d; want 1", len(kept))
	}
	return func() { c.Jar.SetCookies(u, kept) }
}

// heldEnv is an account with an authenticator app, attack mode on.
func heldEnv(t *testing.T, o xcloaktest.Options, email string) (*xcloaktest.Env, string, mfaUser) {
	t.Helper()
	o.Auth = func(c *auth.Config) { c.NotifyNewDevice = false }
	env, base, clk := mfaEnv(t, o)
	u := enrolTOTP(t, env, base, clk, email, false)
	attackOn(t, env)
	return env, base, u
}

// TestHeldCodeSignsIn: in attack mode, a new browser held after the right
// password finishes with its factor's code in place of the mailed link,
// from the API and from the held page: it is signed in, once per held
// answer, and made a known device, which is then asked for its code as a
// known device is, no longer held.
func TestHeldCodeSignsIn(t *testing.T) {
	_, base, u := heldEnv(t, xcloaktest.Options{Web: func(c *webConfig) { c.ProtectedHosts = mustHosts(t, "app.example.test") }}, "held@example.test")
	for i, api := range []bool{true, false} {
		c := xcloaktest.Client(t, fmt.Sprintf("127.0.35.%d", i+1))
		u.clk.Advance(30 * time.Second)
		code := u.code(t)
		var token string
		var restore func()
		if api {
			token = heldJSON(t, c, base, u.email, u.password)
			restore = keepBinding(t, c, base)
			if status, body := mfaJSON(t, c, base, token, code); status != 200 || body != `{"status":"ok"}` {
				t.Fatalf("api: the held answer's code: %d %s; want 200 ok", status, body)
			}
		} else {
			form := url.Values{"email": {u.email}, "password": {u.password}, "rd": {appPage}}
			resp, page := post(t, c, base+"/login", formType, form.Encode())
			m := mfaTokenRe.FindStringSubmatch(page)
			if resp.StatusCode != http.StatusAccepted || m == nil || !strings.Contains(page, `id="held-code"`) {
				t.Fatalf("held page: %d, token %v; want 202 with the code's form", resp.StatusCode, m)
			}
			token = m[1]
			restore = keepBinding(t, c, base)
			resp, body := post(t, c, base+"/login/mfa", formType, url.Values{"mfa_token": {token}, "code": {code}, "rd": {appPage}}.Encode())
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != appPage {
				t.Fatalf("form: the held page's code: %d %s %s; want 303 to rd", resp.StatusCode, resp.Header.Get("Location"), body)
			}
		}
		if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusOK {
			t.Fatalf("api=%v: the account after the code: %d; want 200", api, resp.StatusCode)
		}
		u.clk.Advance(30 * time.Second)
		// The token signs in once, even with the next right code.
		restore()
		if status, body := mfaJSON(t, c, base, token, u.code(t)); status != 400 || body != `{"error":"invalid_token"}` {
			t.Errorf("api=%v: the held token again: %d %s; want 400 invalid_token", api, status, body)
		}
		// A known device now: not held, asked for its code.
		post(t, c, base+"/logout", formType, "")
		mfaLoginJSON(t, c, base, u)
	}
}

// TestHeldCodeOnlyForTheRightPassword: the right code on the held answer
// to a wrong password, or one whose password has changed since, or with
// another browser's binding, signs nothing in, and the wrong password's
// is refused as a wrong code is, spending nothing: the same code then
// finishes the right password's held answer.
func TestHeldCodeOnlyForTheRightPassword(t *testing.T) {
	env, base, u := heldEnv(t, xcloaktest.Options{}, "held2@example.test")
	c := xcloaktest.Client(t, "127.0.36.1")
	wrong := heldJSON(t, c, base, u.email, "not the password at all")
	code := u.code(t)
	if status, body := mfaJSON(t, c, base, wrong, code); status != 401 || body != `{"error":"invalid_code"}` {
		t.Fatalf("the right code on a wrong password's held answer: %d %s; want 401 invalid_code", status, body)
	}
	if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a wrong password and the right code reach the account: %d", resp.StatusCode)
	}
	right := heldJSON(t, c, base, u.email, u.password)
	// Another browser with the token alone.
	if status, body := mfaJSON(t, xcloaktest.Client(t, "127.0.36.1"), base, right, code); status != 400 || body != `{"error":"invalid_token"}` {
		t.Errorf("another browser's held token: %d %s; want 400 invalid_token", status, body)
	}
	if status, body := mfaJSON(t, c, base, right, code); status != 200 {
		t.Fatalf("the code the wrong password's answer did not spend: %d %s; want 200", status, body)
	}

	// On the page, a refused code is answered on the held page again,
	// which says nothing of the password.
	f := xcloaktest.Client(t, "127.0.36.3")
	_, page := postSignIn(t, f, base, u.email, "not the password either")
	m := mfaTokenRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no token on the held page")
	}
	resp, page := post(t, f, base+"/login/mfa", formType, url.Values{"mfa_token": {m[1]}, "code": {u.code(t)}}.Encode())
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, `id="verification-sent"`) ||
		strings.Contains(page, "password was right") || !strings.Contains(page, m[1]) {
		t.Errorf("the held page's refused code: %d; want 401, the held page again with its token:\n%s", resp.StatusCode, page)
	}

	// A password changed after the held answer kills it.
	d := xcloaktest.Client(t, "127.0.36.2")
	token := heldJSON(t, d, base, u.email, u.password)
	if err := env.Service.SetPassword(t.Context(), u.email, "another horse battery", "cli"); err != nil {
		t.Fatal(err)
	}
	u.clk.Advance(30 * time.Second)
	if status, body := mfaJSON(t, d, base, token, u.code(t)); status != 401 || body != `{"error":"invalid_code"}` {
		t.Errorf("a held token after a password change: %d %s; want 401 invalid_code", status, body)
	}
	if resp, _ := get(t, d, base+"/account"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a held token after a password change reaches the account: %d", resp.StatusCode)
	}
}

// TestHeldRecoveryCodeOnlyForTheRightPassword: a recovery code on a wrong
// password's held answer is refused and not spent: it still signs in on
// the right password's.
func TestHeldRecoveryCodeOnlyForTheRightPassword(t *testing.T) {
	_, base, u := heldEnv(t, xcloaktest.Options{}, "held-recovery@example.test")
	c := xcloaktest.Client(t, "127.0.36.4")
	wrong := heldJSON(t, c, base, u.email, "not the password at all")
	if status, body := mfaJSON(t, c, base, wrong, u.recovery[0]); status != 401 || body != `{"error":"invalid_code"}` {
		t.Fatalf("a recovery code on a wrong password's held answer: %d %s; want 401 invalid_code", status, body)
	}
	if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a wrong password and a recovery code reach the account: %d", resp.StatusCode)
	}
	right := heldJSON(t, c, base, u.email, u.password)
	if status, body := mfaJSON(t, c, base, right, u.recovery[0]); status != 200 {
		t.Errorf("the recovery code the wrong password's answer did not spend: %d %s; want 200", status, body)
	}
}

// TestHeldCodesLimitedExactly: many codes at once on one held answer are
// checked exactly the account limit's number of times, whether the
// answer was to an account's right password or to an account that does
// not exist: an attacker with held answers learns nothing from the limits
// either.
func TestHeldCodesLimitedExactly(t *testing.T) {
	for _, tc := range []struct{ name, email string }{
		{"right password", "held3@example.test"},
		{"unknown account", "nobody@example.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, base, u := heldEnv(t, xcloaktest.Options{}, "held3@example.test")
			c := xcloaktest.Client(t, "127.0.37.1")
			token := heldJSON(t, c, base, tc.email, u.password)
			wrong := "999999"
			if wrong == u.code(t) {
				wrong = "888888"
			}
			var mu sync.Mutex
			counts := map[int]int{}
			var wg sync.WaitGroup
			for range 30 {
				wg.Go(func() {
					status, _ := mfaJSON(t, c, base, token, wrong)
					mu.Lock()
					counts[status]++
					mu.Unlock()
				})
			}
			wg.Wait()
			if counts[401] != 5 || counts[429] != 25 {
				t.Errorf("answers %v; want 5 401 and 25 429", counts)
			}
		})
	}
}

// TestHeldAnswersStoreNothing: a held answer writes no row: a stuffing run
// cannot fill the database with second steps.
func TestHeldAnswersStoreNothing(t *testing.T) {
	env, base, u := heldEnv(t, xcloaktest.Options{}, "held4@example.test")
	count := func() (n int) {
		if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM mfa_challenges`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	emails := []string{u.email, "held4b@example.test", "held4c@example.test", "held4d@example.test"}
	for _, e := range emails[1:] {
		env.AddUser(t, e, u.password, false)
	}
	before := count()
	// Five to an account: below its lockout.
	for i := range 20 {
		heldJSON(t, xcloaktest.Client(t, fmt.Sprintf("127.0.38.%d", i+1)), base, emails[i%4], fmt.Sprintf("wrong password %d", i))
	}
	if after := count(); after != before {
		t.Errorf("second steps stored: %d before 20 held answers, %d after; want no new row", before, after)
	}
}

// TestHeldTokenNoPasskeyStep: the passkeys' second step answers a held
// token as it answers a token it does not know: its options would list
// the account's passkeys.
func TestHeldTokenNoPasskeyStep(t *testing.T) {
	_, base, u := heldEnv(t, xcloaktest.Options{}, "held5@example.test")
	for _, path := range []string{"/api/v1/login/mfa/webauthn/options", "/api/v1/login/mfa/webauthn"} {
		var answers []string
		for i, email := range []string{u.email, "nobody@example.test"} {
			c := xcloaktest.Client(t, fmt.Sprintf("127.0.39.%d", i+1))
			held := heldJSON(t, c, base, email, u.password)
			for _, token := range []string{held, strings.Repeat("A", 43), strings.Repeat("A", len(held))} {
				resp, body := post(t, c, base+path, jsonType, `{"mfa_token":"`+token+`"}`)
				answers = append(answers, fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(body)))
			}
		}
		for i, a := range answers {
			if a != answers[0] || !strings.HasPrefix(a, "400 ") {
				t.Errorf("%s: answer %d is %q, the first %q; want all alike, 400", path, i, a, answers[0])
			}
		}
	}
}

// TestHeldBreachedNoCode: a breached password is held with the same
// answer, and its second step takes no code: not when the sign-in knew it
// breached (no attack mode), nor in attack mode, where the mail's job
// finds it breached and spends the step.
func TestHeldBreachedNoCode(t *testing.T) {
	corpus := breachedtest.New(t)
	checker, err := breached.Open(corpus.Serve(t), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	env, base, clk := mfaEnv(t, xcloaktest.Options{Breached: checker, Auth: func(c *auth.Config) { c.NotifyNewDevice = false }})
	u := enrolTOTP(t, env, base, clk, "held6@example.test", false)
	env.Mail.WaitFor(t, u.email) // the factor's notice
	corpus.Add(t, u.password)

	c := xcloaktest.Client(t, "127.0.40.1")
	token := heldJSON(t, c, base, u.email, u.password)
	env.Mail.WaitFor(t, u.email) // choose a new password
	if status, body := mfaJSON(t, c, base, token, u.code(t)); status != 401 || body != `{"error":"invalid_code"}` {
		t.Errorf("a breached password's held answer and the right code: %d %s; want 401 invalid_code", status, body)
	}

	attackOn(t, env)
	d := xcloaktest.Client(t, "127.0.40.2")
	token = heldJSON(t, d, base, u.email, u.password)
	if m := env.Mail.WaitFor(t, u.email); signInLink.MatchString(m.Body) {
		t.Fatalf("a breached password's mail has a sign-in link:\n%s", m.Body)
	}
	if status, body := mfaJSON(t, d, base, token, u.code(t)); status != 400 || body != `{"error":"invalid_token"}` {
		t.Errorf("in attack mode, a breached password's held answer and the right code: %d %s; want 400 invalid_token", status, body)
	}
	if resp, _ := get(t, d, base+"/account"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a breached password and the right code reach the account: %d", resp.StatusCode)
	}
}

// TestHeldCodesLockNoOwnerOut: in attack mode anyone gets a held answer
// for any address, with no password at all; the codes tried on it lock
// the held answers' second step of that address, and never the owner's
// own second step: not the one the mailed link leads to, nor the one
// the right password gets once attack mode is off (keycloak#46164).
func TestHeldCodesLockNoOwnerOut(t *testing.T) {
	env, base, u := heldEnv(t, xcloaktest.Options{}, "held7@example.test")
	env.Mail.WaitFor(t, u.email) // the factor's notice
	a := xcloaktest.Client(t, "127.0.41.1")
	token := heldJSON(t, a, base, u.email, "no idea of the password")
	wrong := "999999"
	if wrong == u.code(t) {
		wrong = "888888"
	}
	for i := range 6 {
		want := 401
		if i == 5 {
			want = 429
		}
		if status, body := mfaJSON(t, a, base, token, wrong); status != want {
			t.Fatalf("attacker's code %d: %d %s; want %d", i+1, status, body, want)
		}
	}

	// The attacker's codes are the address's, not the account's: out of
	// the owner's activity (no user id), marked held in the security log.
	env.Flush(t)
	var mine, held int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE user_id IS NOT NULL),
		count(*) FILTER (WHERE user_id IS NULL AND detail->>'held' = 'true')
		FROM security_events WHERE kind IN ('mfa_failed', 'mfa_lockout', 'mfa_rejected') AND account_key = $1`, u.email).Scan(&mine, &held); err != nil {
		t.Fatal(err)
	}
	if mine != 0 || held != 7 {
		t.Errorf("held codes' events: %d with the account's id, %d marked held; want 0 and 7 (5 wrong, the lock, the refused)", mine, held)
	}

	// The owner's mailed link, then the code.
	link := heldToken(t, env, base, "127.0.41.2", u.email, u.password)
	c := xcloaktest.Client(t, "127.0.41.3")
	resp, body := post(t, c, base+"/api/v1/sign-in/confirm", jsonType, `{"token":"`+link+`"}`)
	var got map[string]string
	if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != http.StatusOK || got["status"] != "mfa_required" {
		t.Fatalf("the owner's link: %d %s; want 200 mfa_required", resp.StatusCode, body)
	}
	if status, body := mfaJSON(t, c, base, got["mfa_token"], u.code(t)); status != 200 {
		t.Fatalf("the owner's code after the link, once an attacker's codes locked held answers: %d %s; want 200", status, body)
	}

	// Attack mode off: the right password's second step.
	if _, err := env.Attack.SwitchAttack(t.Context(), false, "test"); err != nil {
		t.Fatal(err)
	}
	u.clk.Advance(30 * time.Second)
	d := xcloaktest.Client(t, "127.0.41.4")
	if status, body := mfaJSON(t, d, base, mfaLoginJSON(t, d, base, u), u.code(t)); status != 200 {
		t.Errorf("the owner's code after the password, once an attacker's codes locked held answers: %d %s; want 200", status, body)
	}
}

// TestHeldRightCodesRaceOneSession: right codes racing on one held
// answer (recovery codes, each right) sign in exactly once; the others are
// answered invalid_token.
func TestHeldRightCodesRaceOneSession(t *testing.T) {
	env, base, u := heldEnv(t, xcloaktest.Options{}, "held8@example.test")
	c := xcloaktest.Client(t, "127.0.43.1")
	token := heldJSON(t, c, base, u.email, u.password)
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for _, code := range u.recovery[:5] {
		wg.Go(func() {
			status, body := mfaJSON(t, c, base, token, code)
			mu.Lock()
			counts[fmt.Sprintf("%d %s", status, body)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if counts[`200 {"status":"ok"}`] != 1 || counts[`400 {"error":"invalid_token"}`] != 4 {
		t.Errorf("answers %v; want one 200 and four 400 invalid_token", counts)
	}
	var sessions int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.email = $1`, u.email).Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	// The enrolling browser's session and one more.
	if sessions != 2 {
		t.Errorf("sessions: %d; want 2 (the enrolling browser's and the held code's)", sessions)
	}
}
