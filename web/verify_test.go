package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/breached"
	"github.com/xcloak/xcloak/breached/breachedtest"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

var signInLink = regexp.MustCompile(`https://login\.example\.test/sign-in/([A-Za-z0-9_-]{43})`)

// verifyEnv is a whole XCloak that holds every sign-in from a browser
// that is not a known device (the mode that attack mode switches on).
func verifyEnv(t *testing.T, configure ...func(*auth.Config)) (*xcloaktest.Env, string) {
	t.Helper()
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.NewDeviceVerification = auth.VerifyAlways
		for _, set := range configure {
			set(c)
		}
	}})
	return env, env.Start(t)
}

// heldToken signs in to email with its right password from a new browser
// at source, which is held, and returns the token of the link mailed.
func heldToken(t *testing.T, env *xcloaktest.Env, base, source, email, password string) string {
	t.Helper()
	if resp, body := post(t, xcloaktest.Client(t, source), base+"/api/v1/login", jsonType, loginJSON(email, password)); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("held sign-in: %d %s", resp.StatusCode, body)
	}
	m := signInLink.FindStringSubmatch(env.Mail.WaitFor(t, email).Body)
	if m == nil {
		t.Fatal("no sign-in link in the mail")
	}
	return m[1]
}

// answer is everything a response tells its client but its date and its
// request ID, which is random (requestid.New) and not derived from the
// request.
type answer struct {
	status  int
	headers string
	body    string
}

// Held answers differ in their second step's token and binding cookie,
// random each: the token's value is masked, its length kept, and the
// binding cookie's value and Max-Age, which counts down on the wall's
// clock.
func answerOf(resp *http.Response, body string) answer {
	var lines []string
	for name, values := range resp.Header {
		if name == "Date" || name == "X-Request-Id" {
			continue
		}
		for _, v := range values {
			if name == "Set-Cookie" && bindingCookieRe.MatchString(v) {
				// Its value is random, and its lifetime counts from the
				// answer's second, as Date does: a new second between two
				// answers tells nothing.
				v = bindingCookieRe.ReplaceAllString(v, "${1}VALUE")
				v = maxAgeRe.ReplaceAllString(v, "Max-Age=N")
				v = expiresRe.ReplaceAllString(v, "Expires=T")
			}
			lines = append(lines, name+": "+v)
		}
	}
	slices.Sort(lines)
	if m := heldTokenRe.FindStringSubmatch(body); m != nil {
		body = strings.ReplaceAll(body, m[2], fmt.Sprintf("TOKEN(%d)", len(m[2])))
	}
	return answer{resp.StatusCode, strings.Join(lines, "\n"), body}
}

// noOracleCase is one sign-in of a test that sign-ins' answers tell
// nothing: its name, and what it sends.
type noOracleCase struct{ name, email, password string }

// rightWrongUnknown are the cases of an account's right password, a wrong
// one, and the right one for an account that does not exist.
func rightWrongUnknown(email, password string) []noOracleCase {
	return []noOracleCase{
		{"right password", email, password},
		{"wrong password", email, "not " + password},
		{"unknown account", "nobody@example.com", password},
	}
}

// postLogin posts a sign-in from c: to the JSON API, or with api false
// through the form.
func postLogin(t *testing.T, c *http.Client, base string, api bool, email, password string) (*http.Response, string) {
	t.Helper()
	if api {
		return post(t, c, base+"/api/v1/login", jsonType, loginJSON(email, password))
	}
	return postSignIn(t, c, base, email, password)
}

// checkHeldAlike fails t unless the first case's answer is held (202) and
// every other case's is the same, byte for byte.
func checkHeldAlike(t *testing.T, api bool, cases []noOracleCase, answers []answer) {
	t.Helper()
	if answers[0].status != http.StatusAccepted {
		t.Fatalf("api=%v, %s: status %d, want 202:\n%s", api, cases[0].name, answers[0].status, answers[0].body)
	}
	for j, a := range answers[1:] {
		if a != answers[0] {
			t.Errorf("api=%v: the answer to the %s differs from the %s's:\n%+v\n%+v", api, cases[j+1].name, cases[0].name, a, answers[0])
		}
	}
}

// askHeld posts each case's sign-in from a browser of its own, at
// 127.0.NET.x, checks that none reaches its account and that the answers
// are held alike (checkHeldAlike), and returns them.
func askHeld(t *testing.T, base string, api bool, net int, cases []noOracleCase) []answer {
	t.Helper()
	first := 1
	if api {
		first = 11
	}
	var answers []answer
	for j, tc := range cases {
		c := xcloaktest.Client(t, fmt.Sprintf("127.0.%d.%d", net, first+j))
		answers = append(answers, answerOf(postLogin(t, c, base, api, tc.email, tc.password)))
		if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("api=%v, %s: the asking browser reaches its account (%d)", api, tc.name, resp.StatusCode)
		}
	}
	checkHeldAlike(t, api, cases, answers)
	return answers
}

// checkLinksOnlyTo waits for n mails to owner, each with a sign-in link,
// and fails t if any mail went to anyone else.
func checkLinksOnlyTo(t *testing.T, env *xcloaktest.Env, owner string, n int) {
	t.Helper()
	for range n {
		if body := env.Mail.WaitFor(t, owner).Body; !signInLink.MatchString(body) {
			t.Fatalf("the owner's mail has no sign-in link:\n%s", body)
		}
	}
	env.Flush(t)
	for _, m := range env.Mail.Messages() {
		if to := strings.Join(m.To, ","); to != owner {
			t.Errorf("mail to %s", to)
		}
	}
	if got := len(env.Mail.Messages()); got != n {
		t.Errorf("%d mails, want %d (one per right password)", got, n)
	}
}

var (
	// heldTokenRe finds a held answer's token in its JSON or on its page.
	heldTokenRe     = regexp.MustCompile(`("mfa_token":"|name="mfa_token" value=")([A-Za-z0-9_-]{44,})"`)
	bindingCookieRe = regexp.MustCompile(`^((?:__Host-)?xcloak_mfa=)[^;]+`)
	maxAgeRe        = regexp.MustCompile(`Max-Age=\d+`)
	expiresRe       = regexp.MustCompile(`Expires=[^;]+`)
)

// TestBreachedPasswordNoOracle: where new-device verification does not
// apply (attack mode off), a browser that is not a known device typing a
// breached password gets the held answer whether the password is right,
// wrong or for no account, so that a stuffing run of breached pairs
// learns nothing of which were right; only the owner of the right one is
// mailed. A wrong password that is not breached is refused as always.
func TestBreachedPasswordNoOracle(t *testing.T) {
	corpus := breachedtest.New(t)
	checker, err := breached.Open(corpus.Serve(t), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := xcloaktest.New(t, xcloaktest.Options{Breached: checker})
	base := env.Start(t)
	env.AddUser(t, "bree@example.com", "the right password", false)
	corpus.Add(t, "the right password")
	corpus.Add(t, "a breached wrong one")
	cases := []noOracleCase{
		{"right breached password", "bree@example.com", "the right password"},
		{"wrong breached password", "bree@example.com", "a breached wrong one"},
		{"unknown account, breached password", "nobody@example.com", "the right password"},
	}
	for _, api := range []bool{false, true} {
		askHeld(t, base, api, 21, cases)
	}
	c := xcloaktest.Client(t, "127.0.21.30")
	if resp, body := post(t, c, base+"/api/v1/login", jsonType, loginJSON("bree@example.com", "a wrong one, not breached")); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong password that is not breached: %d %s, want 401", resp.StatusCode, body)
	}
	// The right one's two sign-ins each mail the owner to choose a new
	// password; the wrong ones mail no one.
	env.Mail.WaitFor(t, "bree@example.com")
	env.Flush(t)
	for _, m := range env.Mail.Messages() {
		if to := strings.Join(m.To, ","); to != "bree@example.com" {
			t.Errorf("mail to %s", to)
		}
	}
}

// TestBreachedLookupFailureHolds: when the breach corpus cannot be read
// (here a range API that throttles every lookup), a new browser's
// sign-in is held alike whether its password is right or wrong, for an
// account or none, from the page and from the API, as when the password
// is breached; and the owner of the right one is mailed a sign-in link,
// the lookup having failed again for the mail. Taken as not breached, a
// run that made the corpus throttle would be told which pairs were right.
func TestBreachedLookupFailureHolds(t *testing.T) {
	throttling := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}))
	t.Cleanup(throttling.Close)
	checker, err := breached.Open(throttling.URL, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := xcloaktest.New(t, xcloaktest.Options{Breached: checker})
	base := env.Start(t)
	env.AddUser(t, "tess@example.com", "the right password", false)
	cases := rightWrongUnknown("tess@example.com", "the right password")
	for _, api := range []bool{false, true} {
		askHeld(t, base, api, 22, cases)
	}
	checkLinksOnlyTo(t, env, "tess@example.com", 2)
}

// TestVerificationNoOracle: while new-device verification applies, a new
// browser's sign-in with the right password, a wrong one and an unknown
// account get the same answer, status, headers (Set-Cookie included) and
// body byte for byte, from the page and from the API; no browser gets a
// session; only the owner gets mail, once per right password.
func TestVerificationNoOracle(t *testing.T) {
	env, base := verifyEnv(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	cases := rightWrongUnknown("ann@example.com", "the password")
	for _, api := range []bool{false, true} {
		answers := askHeld(t, base, api, 20, cases)
		if api && strings.TrimSpace(answers[0].body) != `{"mfa_token":"TOKEN(223)","status":"verification_required"}` {
			t.Errorf("API answer: %s", answers[0].body)
		}
		if !api && (!strings.Contains(answers[0].body, `id="verification-sent"`) ||
			!strings.Contains(answers[0].body, "If the email and password were right")) {
			t.Errorf("api=%v: the page does not say a link was sent:\n%s", api, answers[0].body)
		}
		if strings.Count(answers[0].headers, "Set-Cookie") != 1 || !strings.Contains(answers[0].headers, "Set-Cookie: xcloak_mfa=VALUE") {
			t.Errorf("api=%v: a held sign-in sets cookies but its second step's binding: %s", api, answers[0].headers)
		}
	}
	checkLinksOnlyTo(t, env, "ann@example.com", 2)
}

// TestVerificationGuessesLock: held tries, answered 202 alike, count
// towards the account's lockout, the right password's among them: after
// the threshold of distinct tries, one of them right, the account is
// locked (429), so the lock does not tell that one was right.
func TestVerificationGuessesLock(t *testing.T) {
	env, base := verifyEnv(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 1000) })
	env.AddUser(t, "bob@example.com", "the password", false)
	for i := range env.Auth.Lockout.Threshold {
		c := xcloaktest.Client(t, fmt.Sprintf("127.0.21.%d", i+1))
		password := fmt.Sprint("guess ", i)
		if i == 3 {
			password = "the password"
		}
		if resp, _ := post(t, c, base+"/api/v1/login", jsonType, loginJSON("bob@example.com", password)); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("guess %d: %d, want 202", i, resp.StatusCode)
		}
	}
	resp, _ := post(t, xcloaktest.Client(t, "127.0.21.100"), base+"/api/v1/login", jsonType, loginJSON("bob@example.com", "the password"))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("right password after %d held tries: %d, want 429", env.Auth.Lockout.Threshold, resp.StatusCode)
	}
}

// TestSignInLinkSignsInTheBrowserThatOpensIt: the owner's link, opened in
// another browser, shows a button and spends nothing; pressing it signs
// THAT browser in and makes it a known device, which then signs in with
// the password at once. The browser that asked stays signed out. The link
// works once.
func TestSignInLinkSignsInTheBrowserThatOpensIt(t *testing.T) {
	env, base := verifyEnv(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	asking := xcloaktest.Client(t, "127.0.22.1")
	if resp, _ := post(t, asking, base+"/login", formType, url.Values{"email": {"ann@example.com"}, "password": {"the password"}}.Encode()); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("held sign-in: %d", resp.StatusCode)
	}
	m := signInLink.FindStringSubmatch(env.Mail.WaitFor(t, "ann@example.com").Body)
	if m == nil {
		t.Fatal("no sign-in link in the mail")
	}
	page := base + "/sign-in/" + m[1]

	opener := xcloaktest.Client(t, "127.0.22.2")
	for range 2 {
		resp, body := get(t, opener, page)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="verify-confirm"`) || len(resp.Cookies()) != 0 ||
			resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Fatalf("opening the link: %d, cookies %v\n%s", resp.StatusCode, resp.Cookies(), body)
		}
	}
	resp, _ := post(t, opener, page, formType, "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account" {
		t.Fatalf("confirming the link: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, body := get(t, opener, base+"/account"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "ann@example.com") {
		t.Fatalf("the browser that confirmed: /account %d", resp.StatusCode)
	}
	if deviceCookie(t, env, opener, base, "ann@example.com") == "" {
		t.Fatal("confirming set no device cookie")
	}
	if resp, _ := get(t, asking, base+"/account"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the browser that asked: /account %d, want a redirect to sign in", resp.StatusCode)
	}
	if u, _ := url.Parse(base); len(asking.Jar.Cookies(u)) != 1 || asking.Jar.Cookies(u)[0].Name != "xcloak_mfa" {
		t.Fatalf("the browser that asked has cookies but its held second step's binding: %v", asking.Jar.Cookies(u))
	}
	// Signed out, the confirmed browser is a known device: its password
	// signs it in at once.
	if resp, _ := post(t, opener, base+"/logout", formType, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	signIn(t, opener, base, "ann@example.com", "the password")

	if resp, body := post(t, xcloaktest.Client(t, "127.0.22.3"), page, formType, ""); resp.StatusCode != http.StatusBadRequest ||
		len(resp.Cookies()) != 0 || !strings.Contains(body, "invalid, used or expired") {
		t.Fatalf("second use of the link: %d", resp.StatusCode)
	}
}

// TestSignInLinkAPI: the JSON confirmation signs in the client that sends
// it, answers {"status":"ok"} with its cookies, and refuses a used, an
// expired, a malformed token and one made before the password changed
// with 400 and no cookie.
func TestSignInLinkAPI(t *testing.T) {
	env, base := verifyEnv(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	confirm := func(c *http.Client, token string) (*http.Response, string) {
		return post(t, c, base+"/api/v1/sign-in/confirm", jsonType, fmt.Sprintf(`{"token":%q}`, token))
	}
	token := heldToken(t, env, base, "127.0.23.1", "ann@example.com", "the password")
	c := xcloaktest.Client(t, "127.0.23.2")
	if resp, body := confirm(c, token); resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != `{"status":"ok"}` || len(resp.Cookies()) != 2 {
		t.Fatalf("confirming: %d %s, %d cookies", resp.StatusCode, body, len(resp.Cookies()))
	}
	if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusOK {
		t.Fatalf("/account after confirming: %d", resp.StatusCode)
	}
	refused := func(what, token string) {
		t.Helper()
		c := xcloaktest.Client(t, "127.0.23.3")
		if resp, body := confirm(c, token); resp.StatusCode != http.StatusBadRequest || len(resp.Cookies()) != 0 || !strings.Contains(body, `"invalid_token"`) {
			t.Errorf("%s: %d %s, cookies %v; want 400 invalid_token and none", what, resp.StatusCode, body, resp.Cookies())
		}
		if resp, _ := get(t, c, base+"/sign-in/"+url.PathEscape(token)); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: the link's page is %d, want 400", what, resp.StatusCode)
		}
	}
	refused("a used token", token)
	refused("a malformed token", "not-a-token")

	token = heldToken(t, env, base, "127.0.23.4", "ann@example.com", "the password")
	if _, err := env.DB.Exec(t.Context(), `UPDATE sign_in_tokens SET expires_at = now() - interval '1 second' WHERE used_at IS NULL`); err != nil {
		t.Fatal(err)
	}
	refused("an expired token", token)

	token = heldToken(t, env, base, "127.0.23.5", "ann@example.com", "the password")
	if err := env.Service.SetPassword(t.Context(), "ann@example.com", "another password", "cli"); err != nil {
		t.Fatal(err)
	}
	refused("a token made before the password changed", token)
	var ttl float64
	if err := env.DB.QueryRow(t.Context(), `SELECT extract(epoch FROM max(expires_at - created_at)) FROM sign_in_tokens`).Scan(&ttl); err != nil || ttl != env.Auth.VerificationTTL.Seconds() {
		t.Fatalf("link lifetime %vs (%v), want %v", ttl, err, env.Auth.VerificationTTL)
	}
}

// TestSignInLinkConfirmationsLimited: one network confirming more links
// than reset_confirm_ip allows, valid or not, gets 429.
func TestSignInLinkConfirmationsLimited(t *testing.T) {
	_, base := verifyEnv(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleResetConfirmIP, 3) })
	c := xcloaktest.Client(t, "127.0.24.1")
	for i := range 3 {
		token := strings.Repeat(fmt.Sprint(i), 43)
		if resp, _ := post(t, c, base+"/api/v1/sign-in/confirm", jsonType, fmt.Sprintf(`{"token":%q}`, token)); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("try %d: %d, want 400", i, resp.StatusCode)
		}
	}
	resp, _ := post(t, c, base+"/sign-in/"+strings.Repeat("x", 43), formType, "")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("past the limit: %d, want 429 with Retry-After", resp.StatusCode)
	}
	// Opening a link's page costs a query too, and is counted alike.
	if resp, _ := get(t, c, base+"/sign-in/"+strings.Repeat("y", 43)); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("opening a link past the limit: %d, want 429", resp.StatusCode)
	}
	other := xcloaktest.Client(t, "127.0.24.2")
	for i := range 3 {
		if resp, _ := get(t, other, base+"/sign-in/"+strings.Repeat(fmt.Sprint(i), 43)); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("opening unknown link %d: %d, want 400", i, resp.StatusCode)
		}
	}
	if resp, _ := get(t, other, base+"/sign-in/"+strings.Repeat("z", 43)); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the fourth link opened from one network: %d, want 429", resp.StatusCode)
	}
}

// TestVerificationInAttackMode: with the default mode, sign-ins are as
// before until attack mode comes on; then a returning browser still signs
// in at once, while a new browser's right password, wrong password and
// unknown account get the same 202 and no session; when attack mode ends,
// a new browser signs in with its password again. The dashboard lists the
// held right password.
func TestVerificationInAttackMode(t *testing.T) {
	// The returning browser's first sign-in would mail a notice first
	// (notify_test.go).
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.NotifyNewDevice = false }})
	switchAttack := func(on bool) {
		t.Helper()
		if _, err := env.Attack.SwitchAttack(t.Context(), on, "test"); err != nil {
			t.Fatal(err)
		}
	}
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	returning := xcloaktest.Client(t, "127.0.25.1")
	signIn(t, returning, base, "ann@example.com", "the password")

	switchAttack(true)
	signIn(t, returning, base, "ann@example.com", "the password")
	var answers []answer
	for i, try := range [][2]string{{"ann@example.com", "the password"}, {"ann@example.com", "not it"}, {"nobody@example.com", "the password"}} {
		c := xcloaktest.Client(t, fmt.Sprintf("127.0.25.%d", 10+i))
		answers = append(answers, answerOf(post(t, c, base+"/api/v1/login", jsonType, loginJSON(try[0], try[1]))))
		if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("%v: a new browser reaches its account during attack mode (%d)", try, resp.StatusCode)
		}
	}
	if answers[0].status != http.StatusAccepted || answers[1] != answers[0] || answers[2] != answers[0] {
		t.Fatalf("answers during attack mode differ or are not 202:\n%+v", answers)
	}
	if m := signInLink.FindStringSubmatch(env.Mail.WaitFor(t, "ann@example.com").Body); m == nil {
		t.Fatal("no sign-in link mailed for the right password")
	}

	switchAttack(false)
	signIn(t, xcloaktest.Client(t, "127.0.25.20"), base, "ann@example.com", "the password")

	// The security team sees the held sign-in, and only the one with the
	// right password.
	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.25.30")
	signIn(t, admin, base, adminEmail, anyPassword)
	env.Flush(t)
	if _, page := get(t, admin, base+"/admin"); strings.Count(page, "Sign-in held for new-device verification") != 1 {
		t.Fatal("the dashboard does not list the held sign-in once")
	}
}

// TestSignInLinkPageNamesTheAccount: the link's page says which account
// it signs in to; a browser signed in to another account is warned that
// pressing the button signs it out, so a link an attacker forwards does
// not quietly move a victim's browser into the attacker's account.
func TestSignInLinkPageNamesTheAccount(t *testing.T) {
	env, base := verifyEnv(t)
	env.AddUser(t, "ann@example.com", "the password", false)
	env.AddUser(t, "eve@example.com", "eve's password", false)
	victim := xcloaktest.Client(t, "127.0.26.1")
	own := heldToken(t, env, base, "127.0.26.2", "ann@example.com", "the password")
	if resp, body := post(t, victim, base+"/sign-in/"+own, formType, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("confirming ann's own link: %d %s", resp.StatusCode, body)
	}

	forwarded := heldToken(t, env, base, "127.0.26.3", "eve@example.com", "eve's password")
	resp, page := get(t, victim, base+"/sign-in/"+forwarded)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the forwarded link's page: %d", resp.StatusCode)
	}
	for _, want := range []string{
		`This link signs in to the account <strong class="breakable">eve@example.com</strong>`,
		"This browser is signed in to ann@example.com. Pressing the button signs it out of that account.",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not say %q:\n%s", want, page)
		}
	}

	_, page = get(t, xcloaktest.Client(t, "127.0.26.4"), base+"/sign-in/"+forwarded)
	if !strings.Contains(page, "eve@example.com") || strings.Contains(page, "This browser is signed in to") {
		t.Errorf("a signed-out browser's page should name the account and warn of nothing:\n%s", page)
	}
}

// TestResetAndUnlockPagesLimited: opening a reset or unlock link's page
// costs a query, and is counted by reset_confirm_ip's limit as opening a
// sign-in link's is: one network opening more than it allows, valid or
// not, gets 429 before any lookup.
func TestResetAndUnlockPagesLimited(t *testing.T) {
	_, base := verifyEnv(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleResetConfirmIP, 3) })
	for i, path := range []string{"/password-reset/", "/unlock/"} {
		c := xcloaktest.Client(t, fmt.Sprintf("127.0.25.%d", i+1))
		for j := range 3 {
			if resp, _ := get(t, c, base+path+strings.Repeat(fmt.Sprint(j), 43)); resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("%s: unknown link %d: %d, want 400", path, j, resp.StatusCode)
			}
		}
		resp, _ := get(t, c, base+path+strings.Repeat("z", 43))
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: the fourth link opened from one network: %d, want 429 with Retry-After", path, resp.StatusCode)
		}
	}
}

// TestLinkPagesLimitNotSpentByOtherSites: opening a reset, unlock or
// sign-in link's page counts against reset_confirm_ip for the network, so
// what another site's page (or a sibling host's) makes the owner's
// browser fetch (an image, a frame) is refused before it counts: a page
// of such images would otherwise spend the owner's count, and the link
// mailed to them would answer 429 for the window. A link followed from
// the mail, another site's navigation, still opens the page.
func TestLinkPagesLimitNotSpentByOtherSites(t *testing.T) {
	env, base := verifyEnv(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleResetConfirmIP, 3) })
	env.AddUser(t, "ann@example.com", "the password", false)
	if resp, _ := post(t, xcloaktest.Client(t, "127.0.26.1"), base+"/password-reset", formType, url.Values{"email": {"ann@example.com"}}.Encode()); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("reset request: %d", resp.StatusCode)
	}
	reset := resetLink.FindStringSubmatch(env.Mail.WaitFor(t, "ann@example.com").Body)
	if reset == nil {
		t.Fatal("no reset link in the mail")
	}
	links := map[string]string{
		"/password-reset/": reset[1],
		"/unlock/":         unlockToken(t, env, base, "127.0.26.2", "ann@example.com"),
		"/sign-in/":        heldToken(t, env, base, "127.0.26.3", "ann@example.com", "the password"),
	}
	owner := xcloaktest.Client(t, "127.0.26.10")
	fetch := func(path string, header ...string) *http.Response {
		t.Helper()
		resp, _ := get(t, owner, base+path, header...)
		return resp
	}
	for prefix, token := range links {
		var refused []string
		for _, site := range []string{"same-site", "cross-site"} {
			for i := range 4 {
				made := strings.Repeat(fmt.Sprint(i), 43)
				if resp := fetch(prefix+made, "Sec-Fetch-Site", site, "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "image"); resp.StatusCode != http.StatusForbidden {
					refused = append(refused, fmt.Sprintf("an image of a %s page: %d", site, resp.StatusCode))
				}
			}
			if resp := fetch(prefix+token, "Sec-Fetch-Site", site, "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "iframe"); resp.StatusCode != http.StatusForbidden {
				refused = append(refused, fmt.Sprintf("a frame of a %s page: %d", site, resp.StatusCode))
			}
		}
		if resp := fetch(prefix+token, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document", "Sec-Fetch-User", "?1"); resp.StatusCode != http.StatusOK {
			t.Errorf("the mailed %s… link followed from the mail after other sites' fetches: %d, want 200", prefix, resp.StatusCode)
		}
		if len(refused) > 0 {
			t.Errorf("GET %s… from other sites, want 403 for each: %s", prefix, strings.Join(refused, "; "))
		}
	}
}
