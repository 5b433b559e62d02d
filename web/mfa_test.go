package web_test

import (
	"encoding/base32"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/ratelimit"
)

// mfaUser is an account with an authenticator app enrolled, and the
// clock its server runs on.
type mfaUser struct {
	email, password string
	secret          string // base32
	recovery        []string
	clk             *clock
	// browser enrolled the factor: a known device of the account.
	browser *http.Client
}

var (
	secretRe   = regexp.MustCompile(`id="totp-secret" class="breakable">([A-Z2-7]+)<`)
	factorRe   = regexp.MustCompile(`name="factor" value="(\d+)"`)
	recoveryRe = regexp.MustCompile(`<li><code>([a-z2-7-]+)</code></li>`)
	mfaTokenRe = regexp.MustCompile(`name="mfa_token" value="([A-Za-z0-9_-]+)"`)
)

// mfaEnv starts a server on a settable clock.
func mfaEnv(t *testing.T, o xcloaktest.Options) (*xcloaktest.Env, string, *clock) {
	t.Helper()
	// A step boundary away from the test's moves: codes are computed for
	// the clock, never the wall's.
	clk := &clock{t: time.Unix(time.Now().Unix()/30*30+1, 0)}
	o.Now = clk.Now
	env := xcloaktest.New(t, o)
	return env, env.Start(t), clk
}

// code is the TOTP code of secret at the clock's time.
func (u mfaUser) code(t *testing.T) string {
	t.Helper()
	c, err := totp.GenerateCode(u.secret, u.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// postSignIn signs c in with the HTML form and returns the response.
func postSignIn(t *testing.T, c *http.Client, base, email, password string) (*http.Response, string) {
	t.Helper()
	return post(t, c, base+"/login", formType, url.Values{"email": {email}, "password": {password}}.Encode())
}

// enrolTOTP makes an account and enrols an authenticator app through the
// account pages, from a browser of its own; the next code is for the
// clock's next step.
func enrolTOTP(t *testing.T, env *xcloaktest.Env, base string, clk *clock, email string, admin bool) mfaUser {
	t.Helper()
	u := mfaUser{email: email, password: "correct horse battery", clk: clk}
	env.AddUser(t, email, u.password, admin)
	c := xcloaktest.Client(t, "127.0.30.1")
	if resp, body := postSignIn(t, c, base, email, u.password); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in before enrolment: %d %s", resp.StatusCode, body)
	}
	resp, page := get(t, c, base+"/account/mfa/totp")
	m, f := secretRe.FindStringSubmatch(page), factorRe.FindStringSubmatch(page)
	if resp.StatusCode != 200 || m == nil || f == nil || !strings.Contains(page, `src="data:image/png;base64,`) {
		t.Fatalf("enrolment page: %d, secret %v, factor %v, QR shown %t", resp.StatusCode, m, f, strings.Contains(page, "data:image/png"))
	}
	u.secret = m[1]
	form := url.Values{"factor": {f[1]}, "code": {u.code(t)}, "password": {u.password}}
	resp, page = post(t, c, base+"/account/mfa/totp", formType, form.Encode())
	for _, m := range recoveryRe.FindAllStringSubmatch(page, -1) {
		u.recovery = append(u.recovery, m[1])
	}
	if resp.StatusCode != 200 || len(u.recovery) != auth.RecoveryCodes {
		t.Fatalf("confirming enrolment: %d, %d recovery codes; want 200, %d", resp.StatusCode, len(u.recovery), auth.RecoveryCodes)
	}
	clk.Advance(30 * time.Second)
	u.browser = c
	return u
}

// mfaLoginJSON signs in with the password through the API and returns the
// second step's token, failing unless the answer is exactly mfa_required.
func mfaLoginJSON(t *testing.T, c *http.Client, base string, u mfaUser) string {
	t.Helper()
	resp, body := post(t, c, base+"/api/v1/login", jsonType, `{"email":"`+u.email+`","password":"`+u.password+`"}`)
	var got map[string]string
	if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != 200 || got["status"] != "mfa_required" || len(got) != 2 {
		t.Fatalf("password of an account with a factor: %d %s; want 200 mfa_required", resp.StatusCode, body)
	}
	for _, ck := range resp.Cookies() {
		if strings.Contains(ck.Name, "xcloak_session") && ck.MaxAge >= 0 {
			t.Fatalf("a session cookie came with mfa_required: %s", ck.Name)
		}
	}
	return got["mfa_token"]
}

func mfaJSON(t *testing.T, c *http.Client, base, token, code string) (int, string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"mfa_token": token, "code": code})
	resp, body := post(t, c, base+"/api/v1/login/mfa", jsonType, string(b))
	return resp.StatusCode, strings.TrimSpace(body)
}

// TestMFASignInJSON: the right password of an account with a factor gets
// mfa_required and no session; the right code signs in; the token works
// once, and the code too.
func TestMFASignInJSON(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{})
	u := enrolTOTP(t, env, base, clk, "tara@example.test", false)
	c := xcloaktest.Client(t, "127.0.30.2")
	token := mfaLoginJSON(t, c, base, u)
	if resp, _ := get(t, c, base+"/api/v1/account/sessions"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("sessions after the password alone: %d; want 401", resp.StatusCode)
	}
	code := u.code(t)
	if status, body := mfaJSON(t, c, base, token, code); status != 200 || body != `{"status":"ok"}` {
		t.Fatalf("right code: %d %s; want 200 ok", status, body)
	}
	if resp, body := get(t, c, base+"/api/v1/account/sessions"); resp.StatusCode != 200 {
		t.Fatalf("sessions after the second step: %d %s", resp.StatusCode, body)
	}
	if status, body := mfaJSON(t, c, base, token, code); status != 400 || body != `{"error":"invalid_token"}` {
		t.Errorf("the same token again: %d %s; want 400 invalid_token", status, body)
	}
	// A new step, the same code: its time step was used.
	other := xcloaktest.Client(t, "127.0.30.3")
	token = mfaLoginJSON(t, other, base, u)
	if status, body := mfaJSON(t, other, base, token, code); status != 401 || body != `{"error":"invalid_code"}` {
		t.Errorf("a used code on a new step: %d %s; want 401 invalid_code", status, body)
	}
	clk.Advance(30 * time.Second)
	if status, body := mfaJSON(t, other, base, token, u.code(t)); status != 200 {
		t.Errorf("the next code: %d %s; want 200", status, body)
	}
}

// TestMFADeviceOutlivesAttackStart: a new browser signed in by its
// second factor is verified, not a password alone; attack mode's start,
// which forgets the browsers new since it began, keeps it and its session.
func TestMFADeviceOutlivesAttackStart(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{})
	u := enrolTOTP(t, env, base, clk, "tara@example.test", false)
	since := clk.Now()
	c := xcloaktest.Client(t, "127.0.30.2")
	if status, body := mfaJSON(t, c, base, mfaLoginJSON(t, c, base, u), u.code(t)); status != 200 {
		t.Fatalf("right code: %d %s; want 200", status, body)
	}
	if gone, err := env.Service.SignOutNewDevices(t.Context(), since, nil); err != nil || len(gone) != 0 {
		t.Fatalf("attack mode's start signed out %+v, %v; want nobody", gone, err)
	}
	if resp, body := get(t, c, base+"/api/v1/account/sessions"); resp.StatusCode != 200 {
		t.Errorf("the browser's session after attack mode's start: %d %s", resp.StatusCode, body)
	}
}

// TestMFATokenBelongsToItsBrowser: a token sent by another browser, or
// after it expired, signs nothing in.
func TestMFATokenBelongsToItsBrowser(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{})
	u := enrolTOTP(t, env, base, clk, "uma@example.test", false)
	a, b := xcloaktest.Client(t, "127.0.30.4"), xcloaktest.Client(t, "127.0.30.4")
	token := mfaLoginJSON(t, a, base, u)
	if status, body := mfaJSON(t, b, base, token, u.code(t)); status != 400 || body != `{"error":"invalid_token"}` {
		t.Errorf("another browser's token: %d %s; want 400 invalid_token", status, body)
	}
	clk.Advance(auth.DefaultMFAChallengeTTL + time.Second)
	if status, body := mfaJSON(t, a, base, token, u.code(t)); status != 400 || body != `{"error":"invalid_token"}` {
		t.Errorf("an expired token: %d %s; want 400 invalid_token", status, body)
	}
}

// TestMFAWrongPasswordTellsNothing: a wrong password gets the same answer
// whether or not the account has a factor.
func TestMFAWrongPasswordTellsNothing(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{})
	enrolTOTP(t, env, base, clk, "vera@example.test", false)
	env.AddUser(t, "walt@example.test", "correct horse battery", false)
	var answers []string
	for _, email := range []string{"vera@example.test", "walt@example.test", "nobody@example.test"} {
		c := xcloaktest.Client(t, "127.0.30.5")
		resp, body := post(t, c, base+"/api/v1/login", jsonType, `{"email":"`+email+`","password":"wrong password here"}`)
		answers = append(answers, resp.Status+" "+body+" "+strings.Join(resp.Header.Values("Set-Cookie"), ";"))
	}
	if answers[0] != answers[1] || answers[1] != answers[2] {
		t.Errorf("wrong passwords answered apart:\n%s", strings.Join(answers, "\n"))
	}
}

// TestMFASixthWrongCode: five wrong codes in a row are each refused as
// wrong; the sixth, and then even the right one, gets 429 too many
// attempts. The password's own lockout counted none of them.
func TestMFASixthWrongCode(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{})
	u := enrolTOTP(t, env, base, clk, "xena@example.test", false)
	c := xcloaktest.Client(t, "127.0.30.6")
	token := mfaLoginJSON(t, c, base, u)
	wrong := "000000"
	if wrong == u.code(t) {
		wrong = "111111"
	}
	for i := 1; i <= 5; i++ {
		if status, body := mfaJSON(t, c, base, token, wrong); status != 401 || body != `{"error":"invalid_code"}` {
			t.Fatalf("wrong code %d: %d %s; want 401 invalid_code", i, status, body)
		}
	}
	status, body := mfaJSON(t, c, base, token, wrong)
	if status != 429 || !strings.HasPrefix(body, `{"error":"too_many_attempts"`) {
		t.Fatalf("sixth wrong code: %d %s; want 429 too_many_attempts", status, body)
	}
	if status, _ := mfaJSON(t, c, base, token, u.code(t)); status != 429 {
		t.Errorf("the right code while locked: %d; want 429", status)
	}
	// The password still gets its second step: the codes' lock is not the
	// password's.
	mfaLoginJSON(t, xcloaktest.Client(t, "127.0.30.7"), base, u)

	// The security team sees the lock, on the dashboard and the account's
	// page, and lifts it from the dashboard: the right code then signs in.
	env.AddUser(t, "root@example.test", "correct horse battery", true)
	admin := xcloaktest.Client(t, "127.0.30.8")
	signIn(t, admin, base, "root@example.test", "correct horse battery")
	if _, page := get(t, admin, base+"/admin"); !strings.Contains(page, "(second step)") {
		t.Errorf("the dashboard does not list the second step's lock")
	}
	owner, err := env.Service.UserByEmail(t.Context(), u.email)
	if err != nil {
		t.Fatal(err)
	}
	if _, page := get(t, admin, fmt.Sprintf("%s/admin/users/%d", base, owner.ID)); !strings.Contains(page, "Locked until") || !strings.Contains(page, "(second step)") {
		t.Errorf("the account's page does not say its second step is locked")
	} else if !strings.Contains(page, "Lock out new browsers for") || !strings.Contains(page, ">Unlock<") {
		t.Errorf("the account's page of a second step locked does not offer both to lock its password and to unlock")
	}
	for _, lock := range []string{"", "bogus", "held\x00"} {
		if resp, _ := post(t, admin, base+"/admin/lockouts/unlock", formType, url.Values{"email": {u.email}, "lock": {lock}}.Encode()); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("unlock of lock %q: %d, want 400", lock, resp.StatusCode)
		}
	}
	// Its password's lockout, which it has not: nothing ended.
	resp, _ := post(t, admin, base+"/admin/lockouts/unlock", formType, url.Values{"email": {u.email}, "lock": {"password"}}.Encode())
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "notice=not-locked") {
		t.Fatalf("unlock of a password not locked: %d %s, want not-locked", resp.StatusCode, resp.Header.Get("Location"))
	}
	if status, _ := mfaJSON(t, c, base, token, u.code(t)); status != 429 {
		t.Errorf("the right code after the password's unlock: %d; want 429, its second step still locked", status)
	}
	resp, _ = post(t, admin, base+"/admin/lockouts/unlock", formType, url.Values{"email": {u.email}, "lock": {auth.SecondStepOwn}}.Encode())
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "notice=unlocked") {
		t.Fatalf("unlock of the second step from the dashboard: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if status, body := mfaJSON(t, c, base, token, u.code(t)); status != 200 {
		t.Errorf("the right code after the unlock: %d %s; want 200", status, body)
	}
}

// TestMFAConcurrentCodesExact: of many wrong codes at once on one
// account, exactly the limit's count are checked; the others are refused
// unchecked. Per network, likewise.
func TestMFAConcurrentCodesExact(t *testing.T) {
	for _, tc := range []struct {
		name       string
		configure  func(*auth.Config)
		wantWrong  int
		concurrent int
	}{
		{"account", nil, 5, 30},
		{"network", func(c *auth.Config) { c.Limits.SetCount(auth.RuleMFAAccount, 1000) }, 20, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, base, clk := mfaEnv(t, xcloaktest.Options{Auth: tc.configure})
			u := enrolTOTP(t, env, base, clk, "yuri@example.test", false)
			c := xcloaktest.Client(t, "127.0.30.8")
			token := mfaLoginJSON(t, c, base, u)
			var mu sync.Mutex
			counts := map[int]int{}
			var wg sync.WaitGroup
			for range tc.concurrent {
				wg.Go(func() {
					status, _ := mfaJSON(t, c, base, token, "999999")
					mu.Lock()
					counts[status]++
					mu.Unlock()
				})
			}
			wg.Wait()
			if counts[401] != tc.wantWrong || counts[429] != tc.concurrent-tc.wantWrong {
				t.Errorf("answers %v; want %d 401 and %d 429", counts, tc.wantWrong, tc.concurrent-tc.wantWrong)
			}
		})
	}
}

// TestMFARecoveryCodeOnce: a recovery code finishes a second step once.
func TestMFARecoveryCodeOnce(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{})
	u := enrolTOTP(t, env, base, clk, "zoe@example.test", false)
	c := xcloaktest.Client(t, "127.0.30.9")
	if status, body := mfaJSON(t, c, base, mfaLoginJSON(t, c, base, u), strings.ToUpper(u.recovery[3])); status != 200 {
		t.Fatalf("a recovery code, typed in capitals: %d %s; want 200", status, body)
	}
	d := xcloaktest.Client(t, "127.0.30.9")
	if status, body := mfaJSON(t, d, base, mfaLoginJSON(t, d, base, u), u.recovery[3]); status != 401 {
		t.Errorf("the recovery code again: %d %s; want 401", status, body)
	}
}

// TestMFAFormAndRememberedBrowser: the sign-in form leads to the second
// step's page, on a known device too; with "remember this browser", the next sign-in from it
// needs the password alone, and another browser still the code.
func TestMFAFormAndRememberedBrowser(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{})
	u := enrolTOTP(t, env, base, clk, "abel@example.test", false)
	// A known device not remembered still gets the second step.
	post(t, u.browser, base+"/logout", formType, "")
	if resp, page := postSignIn(t, u.browser, base, u.email, u.password); resp.StatusCode != 200 || !mfaTokenRe.MatchString(page) {
		t.Fatalf("known device: %d; want the second step", resp.StatusCode)
	}
	c := xcloaktest.Client(t, "127.0.30.10")
	resp, page := postSignIn(t, c, base, u.email, u.password)
	m := mfaTokenRe.FindStringSubmatch(page)
	if resp.StatusCode != 200 || m == nil || !strings.Contains(page, `name="remember"`) {
		t.Fatalf("sign-in form: %d, token %v; want 200 and the second step's page", resp.StatusCode, m)
	}
	resp, body := post(t, c, base+"/login/mfa", formType, url.Values{"mfa_token": {m[1]}, "code": {u.code(t)}, "remember": {"on"}}.Encode())
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account" {
		t.Fatalf("second step: %d %s %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	post(t, c, base+"/logout", formType, "")
	if resp, _ := postSignIn(t, c, base, u.email, u.password); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("remembered browser: %d; want 303, signed in with the password", resp.StatusCode)
	}
	if resp, page := postSignIn(t, xcloaktest.Client(t, "127.0.30.10"), base, u.email, u.password); resp.StatusCode != 200 || !mfaTokenRe.MatchString(page) {
		t.Errorf("another browser: %d; want the second step", resp.StatusCode)
	}
}

// TestAdminMFARequired: with XCLOAK_ADMIN_MFA=required an administrator
// without a factor is sent to enrol one, and once enrolled reaches the
// dashboard.
func TestAdminMFARequired(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.MFA.Admins = auth.AdminMFARequired }})
	env.AddUser(t, "root@example.test", "correct horse battery", true)
	c := xcloaktest.Client(t, "127.0.30.11")
	postSignIn(t, c, base, "root@example.test", "correct horse battery")
	if resp, _ := get(t, c, base+"/admin"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account/mfa" {
		t.Fatalf("admin without a factor: %d %s; want 303 /account/mfa", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, body := get(t, c, base+"/api/v1/admin/stats"); resp.StatusCode != 403 || !strings.Contains(body, "mfa_enrolment_required") {
		t.Errorf("admin API without a factor: %d %s; want 403 mfa_enrolment_required", resp.StatusCode, body)
	}
	if _, page := get(t, c, base+"/account/mfa"); !strings.Contains(page, `id="mfa-required"`) {
		t.Errorf("the factors page does not say a factor is required")
	}
	u := enrolTOTP(t, env, base, clk, "admin2@example.test", true)
	d := xcloaktest.Client(t, "127.0.30.12")
	_, page := postSignIn(t, d, base, u.email, u.password)
	m := mfaTokenRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no second step for the administrator")
	}
	post(t, d, base+"/login/mfa", formType, url.Values{"mfa_token": {m[1]}, "code": {u.code(t)}}.Encode())
	if resp, _ := get(t, d, base+"/admin"); resp.StatusCode != 200 {
		t.Errorf("admin with a factor: %d; want 200", resp.StatusCode)
	}

	// An open dashboard ends once its administrator has no factor left,
	// as the next request to it would be refused.
	events, _ := openStream(t, d, base+"/admin/stream")
	awaitEvent(t, events, "live", func(string) bool { return true })
	if _, err := env.DB.Exec(t.Context(), `DELETE FROM second_factors WHERE user_id = (SELECT id FROM users WHERE email = $1)`, u.email); err != nil {
		t.Fatal(err)
	}
	ended := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-events:
		case <-ended:
			t.Fatal("the dashboard's stream still runs 10 s after its administrator's factor was removed")
		}
	}
}

// TestAdminRemovesFactors: an administrator removes an account's factors;
// its password alone signs in again, the event names the administrator,
// and the owner is mailed.
func TestAdminRemovesFactors(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{})
	u := enrolTOTP(t, env, base, clk, "bea@example.test", false)
	env.AddUser(t, "boss@example.test", "correct horse battery", true)
	a := xcloaktest.Client(t, "127.0.30.13")
	postSignIn(t, a, base, "boss@example.test", "correct horse battery")
	var id int64
	if err := env.DB.QueryRow(t.Context(), `SELECT id FROM users WHERE email = $1`, u.email).Scan(&id); err != nil {
		t.Fatal(err)
	}
	resp, _ := post(t, a, fmt.Sprintf("%s/admin/users/%d/mfa/remove", base, id), formType, "")
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "notice=factors-removed") {
		t.Fatalf("removing factors: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := postSignIn(t, xcloaktest.Client(t, "127.0.30.14"), base, u.email, u.password); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("sign-in after removal: %d; want 303 with the password alone", resp.StatusCode)
	}
	for {
		m := env.Mail.WaitFor(t, u.email)
		if strings.Contains(m.Subject, "second factors were removed") {
			break
		}
	}
	env.Flush(t)
	var by string
	if err := env.DB.QueryRow(t.Context(), `SELECT detail->>'by' FROM security_events WHERE kind = $1 AND user_id = (SELECT id FROM users WHERE email = $2)`,
		auth.EventFactorRemoved, u.email).Scan(&by); err != nil || by != "admin:boss@example.test" {
		t.Errorf("factor_removed event by %q (%v); want admin:boss@example.test", by, err)
	}
}

// TestTOTPSecretSealed: with a key, no TOTP secret is stored readable.
func TestTOTPSecretSealed(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	env, base, clk := mfaEnv(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.MFA.Key = key }})
	u := enrolTOTP(t, env, base, clk, "cy@example.test", false)
	var stored []byte
	if err := env.DB.QueryRow(t.Context(), `SELECT secret FROM second_factors`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	raw, _ := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(u.secret)
	if stored[0] != 1 || strings.Contains(string(stored), string(raw)) {
		t.Errorf("stored secret is not sealed: % x", stored[:8])
	}
	c := xcloaktest.Client(t, "127.0.30.15")
	if status, body := mfaJSON(t, c, base, mfaLoginJSON(t, c, base, u), u.code(t)); status != 200 {
		t.Errorf("sealed factor's code: %d %s", status, body)
	}
}

// TestMFACodeOnceAtOnce: one TOTP code sent at once to ten second steps of
// the account, from ten browsers, signs in exactly one; one step sent the
// right code ten times at once signs in once too.
func TestMFACodeOnceAtOnce(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.Limits.SetCount(auth.RuleMFAAccount, 100)
		c.Limits.SetCount(auth.RuleLoginAccount, 100)
	}})
	u := enrolTOTP(t, env, base, clk, "dee@example.test", false)
	count := func(send func(i int) int) map[int]int {
		var mu sync.Mutex
		var wg sync.WaitGroup
		got := map[int]int{}
		for i := range 10 {
			wg.Go(func() {
				status := send(i)
				mu.Lock()
				got[status]++
				mu.Unlock()
			})
		}
		wg.Wait()
		return got
	}
	clients, tokens := make([]*http.Client, 10), make([]string, 10)
	for i := range clients {
		clients[i] = xcloaktest.Client(t, "127.0.30.16")
		tokens[i] = mfaLoginJSON(t, clients[i], base, u)
	}
	code := u.code(t)
	if got := count(func(i int) int { s, _ := mfaJSON(t, clients[i], base, tokens[i], code); return s }); got[200] != 1 || got[401] != 9 {
		t.Errorf("one code on ten steps: %v; want one 200 and nine 401", got)
	}
	clk.Advance(30 * time.Second)
	c := xcloaktest.Client(t, "127.0.30.17")
	token := mfaLoginJSON(t, c, base, u)
	code = u.code(t)
	got := count(func(int) int { s, _ := mfaJSON(t, c, base, token, code); return s })
	if got[200] != 1 {
		t.Errorf("one step, the right code ten times: %v; want exactly one 200", got)
	}
}

// TestMFAWithRedisDownUnderOpen: with Redis unreachable and the open
// failure policy, which gives up the limits to keep sign-ins working, the
// second step takes the right code as ever. The open policy's failure,
// counted nowhere, once read as "locked already": every code was refused,
// and no account with a factor could sign in for the whole outage.
func TestMFAWithRedisDownUnderOpen(t *testing.T) {
	srv := testenv.PrivateRedis(t)
	env, base, clk := mfaEnv(t, xcloaktest.Options{Redis: fastRedis(t, srv.URL()), Prefix: "xcloak:",
		Auth: func(c *auth.Config) { c.RedisFailure = ratelimit.FailOpen }})
	u := enrolTOTP(t, env, base, clk, "tara@example.test", false)
	srv.Stop()
	c := xcloaktest.Client(t, "127.0.30.2")
	token := mfaLoginJSON(t, c, base, u)
	if !env.Service.Degraded() {
		t.Fatal("not in degraded mode with Redis down")
	}
	if status, body := mfaJSON(t, c, base, token, u.code(t)); status != 200 || body != `{"status":"ok"}` {
		t.Fatalf("the right code with Redis down, open policy: %d %s; want 200 ok", status, body)
	}
}

// TestTOTPKeyNotShownWithoutPassword: the key an enrolment sets up is
// shown again only to a request whose password was right (a wrong code,
// to try another); a session alone, posting the enrolment's factor with
// no password or a wrong one, gets a new key of its own and never reads
// the one its owner is scanning.
func TestTOTPKeyNotShownWithoutPassword(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	const email, password = "kim@example.com", "correct horse battery"
	env.AddUser(t, email, password, false)
	owner := xcloaktest.Client(t, "127.0.30.41")
	if resp, body := postSignIn(t, owner, base, email, password); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, body)
	}
	_, page := get(t, owner, base+"/account/mfa/totp")
	m, f := secretRe.FindStringSubmatch(page), factorRe.FindStringSubmatch(page)
	if m == nil || f == nil {
		t.Fatalf("enrolment page without a key: %s", page)
	}
	for _, pw := range []string{"", "not the password"} {
		form := url.Values{"factor": {f[1]}, "code": {"000000"}, "password": {pw}}
		resp, page := post(t, owner, base+"/account/mfa/totp", formType, form.Encode())
		if resp.StatusCode < 400 || strings.Contains(page, m[1]) {
			t.Errorf("password %q: %d, the key being set up shown: %t", pw, resp.StatusCode, strings.Contains(page, m[1]))
		}
	}
	// A new key, as a new visit gives (the one before is replaced).
	_, page = get(t, owner, base+"/account/mfa/totp")
	m, f = secretRe.FindStringSubmatch(page), factorRe.FindStringSubmatch(page)
	form := url.Values{"factor": {f[1]}, "code": {"000000"}, "password": {password}}
	if resp, page := post(t, owner, base+"/account/mfa/totp", formType, form.Encode()); resp.StatusCode < 400 || !strings.Contains(page, m[1]) {
		t.Errorf("a wrong code with the password: %d, the key shown again: %t", resp.StatusCode, strings.Contains(page, m[1]))
	}
}

// TestCrossSiteTOTPPageKeepsThePendingKey: GET /account/mfa/totp draws a
// new key in place of the account's pending one. The SameSite=Lax session
// cookie goes with a navigation from any site, so another site that sends
// the owner's browser there while the owner scans a key is sent to the
// list of factors instead, and the key the owner scanned still confirms.
func TestCrossSiteTOTPPageKeepsThePendingKey(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{})
	const email, password = "tove@example.com", "correct horse battery"
	env.AddUser(t, email, password, false)
	c := xcloaktest.Client(t, "127.0.31.1")
	if resp, body := postSignIn(t, c, base, email, password); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, body)
	}
	// The owner opens the enrolment page and scans its key.
	_, page := get(t, c, base+"/account/mfa/totp")
	m, f := secretRe.FindStringSubmatch(page), factorRe.FindStringSubmatch(page)
	if m == nil || f == nil {
		t.Fatalf("enrolment page without a key: %s", page)
	}
	scanned, id := m[1], f[1]

	// Another site navigates the owner's browser to the enrolment page.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/account/mfa/totp", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	req.Header.Set("Sec-Fetch-Dest", "document")
	req.Header.Set("Sec-Fetch-User", "?1") // a link followed: its script's navigation is refused before
	if resp, _ := do(t, c, req); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account/mfa" {
		t.Errorf("another site's navigation to /account/mfa/totp: %d (Location %q), want 303 to /account/mfa", resp.StatusCode, resp.Header.Get("Location"))
	}

	// The owner types the code of the key they scanned.
	code, err := totp.GenerateCode(scanned, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"factor": {id}, "code": {code}, "password": {password}}
	resp, page := post(t, c, base+"/account/mfa/totp", formType, form.Encode())
	if resp.StatusCode != http.StatusOK || len(recoveryRe.FindAllStringSubmatch(page, -1)) == 0 {
		t.Errorf("the owner's confirmation of the key they scanned, after another site's navigation: %d (Location %q), want 200 with recovery codes",
			resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestRememberedBrowserShortenedWithItsSetting: a browser remembered
// while XCLOAK_MFA_REMEMBER was longer is asked for the code again by a
// server with a shorter one, rather than skip the second step for the
// rest of the longer time; under the longer one it is still remembered.
func TestRememberedBrowserShortenedWithItsSetting(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.MFA.RememberFor = 90 * 24 * time.Hour }})
	short := env.Replica(t, xcloaktest.Options{Now: clk.Now, Auth: func(c *auth.Config) { c.MFA.RememberFor = 7 * 24 * time.Hour }})
	shortBase := short.Start(t)
	u := enrolTOTP(t, env, base, clk, "abel@example.test", false)
	c := xcloaktest.Client(t, "127.0.30.11")
	resp, page := postSignIn(t, c, base, u.email, u.password)
	m := mfaTokenRe.FindStringSubmatch(page)
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("sign-in form: %d; want the second step's page", resp.StatusCode)
	}
	if resp, body := post(t, c, base+"/login/mfa", formType, url.Values{"mfa_token": {m[1]}, "code": {u.code(t)}, "remember": {"on"}}.Encode()); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("second step: %d %s", resp.StatusCode, body)
	}
	post(t, c, base+"/logout", formType, "")
	clk.Advance(24 * time.Hour)

	if resp, page := postSignIn(t, c, shortBase, u.email, u.password); resp.StatusCode != 200 || !mfaTokenRe.MatchString(page) {
		t.Errorf("remembered for 90 days a day ago, signing in where it is 7: %d to %q; want the second step", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := postSignIn(t, c, base, u.email, u.password); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("remembered for 90 days a day ago, signing in where it is 90: %d; want 303, signed in with the password", resp.StatusCode)
	}
}

// TestTOTPEnrolPageLimited: each visit to the enrolment page draws a key
// and writes it, so it counts against account_ip as the owner's other
// acts do: past the limit a session's visits are answered 429 and write
// nothing.
func TestTOTPEnrolPageLimited(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleAccountIP, 3) }})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "ann password", false)
	b := newBrowser(t, "127.0.17.9", firefoxLinux)
	b.signIn(t, base, "ann@example.com", "ann password")
	statuses := make([]int, 0, 5)
	for range 5 {
		resp, _ := b.send(t, http.MethodGet, base+"/account/mfa/totp", "", "")
		statuses = append(statuses, resp.StatusCode)
	}
	if statuses[0] != http.StatusOK || statuses[len(statuses)-1] != http.StatusTooManyRequests {
		t.Errorf("five visits to the enrolment page with account_ip at 3: %v, want 200 first and 429 last", statuses)
	}
}
