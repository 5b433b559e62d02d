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
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// attackOn switches attack mode on for env.
func attackOn(t *testing.T, env *xcloaktest.Env) {
	t.Helper()
	if _, err := env.Attack.SwitchAttack(t.Context(), true, "test"); err != nil {
		t.Fatal(err)
	}
}

// maskedAnswer is a held answer as answerOf masks it, failing if it has
// no token, and the token.
func maskedAnswer(t *testing.T, resp *http.Response, body string) (answer, string) {
	t.Helper()
	m := heldTokenRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no mfa_token in the held answer %d:\n%s", resp.StatusCode, body)
	}
	return answerOf(resp, body), m[2]
}

// TestMFAHeldTellsNothing: in attack mode, a new browser's right password
// of an account with a factor is answered as a wrong one, an unknown
// account, the right password of an account without one and of a
// disabled account are: the same status, headers and body, from the page
// and from the API, and each carries a second step's token of the same
// length and its binding cookie, so a stuffing run learns neither which
// passwords are right nor which accounts have a factor. None of them gets
// a session.
func TestMFAHeldTellsNothing(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.NotifyNewDevice = false }})
	u := enrolTOTP(t, env, base, clk, "hana@example.test", false)
	env.AddUser(t, "ivan@example.test", u.password, false)
	off := env.AddUser(t, "otto@example.test", u.password, false)
	if _, err := env.Service.DisableUser(t.Context(), off.ID, "cli"); err != nil {
		t.Fatal(err)
	}
	attackOn(t, env)
	cases := []noOracleCase{
		{"right password, factor", u.email, u.password},
		{"wrong password, factor", u.email, "not the password at all"},
		{"unknown account", "nobody@example.test", u.password},
		{"right password, no factor", "ivan@example.test", u.password},
		{"disabled account", "otto@example.test", u.password},
	}
	for i, api := range []bool{false, true} {
		var answers []answer
		for j, tc := range cases {
			c := xcloaktest.Client(t, fmt.Sprintf("127.0.31.%d", 10*i+j+1))
			resp, body := postLogin(t, c, base, api, tc.email, tc.password)
			a, _ := maskedAnswer(t, resp, body)
			answers = append(answers, a)
			if !strings.Contains(a.headers, "xcloak_mfa=VALUE") {
				t.Errorf("api=%v, %s: no binding cookie:\n%s", api, tc.name, a.headers)
			}
			if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusSeeOther {
				t.Errorf("api=%v, %s: the asking browser reaches its account (%d)", api, tc.name, resp.StatusCode)
			}
		}
		checkHeldAlike(t, api, cases, answers)
	}
}

// TestMFASignInLinkAsksForTheCode: the mailed link of a held right
// password does not stand in for the factor: pressing its button leads
// the browser that opened it to the second step, with no session until
// the right code; from the API likewise, mfa_required with a token.
func TestMFASignInLinkAsksForTheCode(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.NotifyNewDevice = false }})
	u := enrolTOTP(t, env, base, clk, "jude@example.test", false)
	env.Mail.WaitFor(t, u.email) // the factor's notice
	attackOn(t, env)
	for _, api := range []bool{false, true} {
		token := heldToken(t, env, base, "127.0.31.30", u.email, u.password)
		c := xcloaktest.Client(t, "127.0.31.31")
		var mfaToken string
		if api {
			resp, body := post(t, c, base+"/api/v1/sign-in/confirm", jsonType, `{"token":"`+token+`"}`)
			var got map[string]string
			if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != http.StatusOK || got["status"] != "mfa_required" || got["mfa_token"] == "" {
				t.Fatalf("API link: %d %s; want 200 mfa_required", resp.StatusCode, body)
			}
			mfaToken = got["mfa_token"]
		} else {
			resp, page := post(t, c, base+"/sign-in/"+token, formType, "")
			m := mfaTokenRe.FindStringSubmatch(page)
			if resp.StatusCode != http.StatusOK || m == nil {
				t.Fatalf("link's button: %d, token %v; want 200 and the second step's page", resp.StatusCode, m)
			}
			mfaToken = m[1]
		}
		if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("api=%v: the link signed in without the code (%d)", api, resp.StatusCode)
		}
		if api {
			if status, body := mfaJSON(t, c, base, mfaToken, u.code(t)); status != 200 {
				t.Fatalf("the code after the link: %d %s", status, body)
			}
		} else {
			resp, body := post(t, c, base+"/login/mfa", formType, url.Values{"mfa_token": {mfaToken}, "code": {u.code(t)}}.Encode())
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("the code after the link: %d %s", resp.StatusCode, body)
			}
		}
		clk.Advance(30 * time.Second)
		if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusOK {
			t.Fatalf("api=%v: after the code, the account: %d", api, resp.StatusCode)
		}
	}
}

// TestMFARememberJSON: "remember": true on the API's second step
// remembers the browser as the form's box does: its next sign-in needs
// the password alone; without it, the next one asks for the code again.
func TestMFARememberJSON(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{})
	u := enrolTOTP(t, env, base, clk, "lena@example.test", false)
	for _, remember := range []bool{false, true} {
		c := xcloaktest.Client(t, "127.0.31.40")
		token := mfaLoginJSON(t, c, base, u)
		b, _ := json.Marshal(map[string]any{"mfa_token": token, "code": u.code(t), "remember": remember})
		if resp, body := post(t, c, base+"/api/v1/login/mfa", jsonType, string(b)); resp.StatusCode != http.StatusOK {
			t.Fatalf("remember=%v: second step %d %s", remember, resp.StatusCode, body)
		}
		clk.Advance(30 * time.Second)
		post(t, c, base+"/logout", formType, "")
		resp, body := post(t, c, base+"/api/v1/login", jsonType, loginJSON(u.email, u.password))
		if got := resp.StatusCode == http.StatusOK && strings.Contains(body, `"status":"ok"`); got != remember {
			t.Errorf("remember=%v: the next sign-in answers %d %s", remember, resp.StatusCode, body)
		}
	}
}

// TestMFARememberOff: with MFAConfig.RememberFor zero
// (XCLOAK_MFA_REMEMBER=0) the second step offers no "remember this
// browser", and a "remember" sent all the same remembers nothing: the
// next sign-in asks for the code again.
func TestMFARememberOff(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.MFA.RememberFor = 0 }})
	u := enrolTOTP(t, env, base, clk, "nils@example.test", false)
	c := xcloaktest.Client(t, "127.0.31.41")
	_, page := postSignIn(t, c, base, u.email, u.password)
	m := mfaTokenRe.FindStringSubmatch(page)
	if m == nil || strings.Contains(page, `name="remember"`) {
		t.Fatalf("second step's page: token %v, a remember box %v; want the token and no box", m, strings.Contains(page, `name="remember"`))
	}
	resp, body := post(t, c, base+"/login/mfa", formType, url.Values{"mfa_token": {m[1]}, "code": {u.code(t)}, "remember": {"on"}}.Encode())
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("second step: %d %s", resp.StatusCode, body)
	}
	clk.Advance(30 * time.Second)
	post(t, c, base+"/logout", formType, "")
	token := mfaLoginJSON(t, c, base, u)
	b, _ := json.Marshal(map[string]any{"mfa_token": token, "code": u.code(t), "remember": true})
	if resp, body := post(t, c, base+"/api/v1/login/mfa", jsonType, string(b)); resp.StatusCode != http.StatusOK {
		t.Fatalf("second step by the API: %d %s", resp.StatusCode, body)
	}
	clk.Advance(30 * time.Second)
	post(t, c, base+"/logout", formType, "")
	if resp, body := post(t, c, base+"/api/v1/login", jsonType, loginJSON(u.email, u.password)); strings.Contains(body, `"status":"ok"`) {
		t.Errorf("after remember with XCLOAK_MFA_REMEMBER=0, the next sign-in answers %d %s; want the second step", resp.StatusCode, body)
	}
}

// TestAdminUserPageFactors: the account's page on the dashboard lists its
// factors and recovery codes left, and its "Remove second factors" button
// removes them: the password alone signs in again.
func TestAdminUserPageFactors(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{})
	u := enrolTOTP(t, env, base, clk, "mona@example.test", false)
	env.AddUser(t, "boss@example.test", "correct horse battery", true)
	a := xcloaktest.Client(t, "127.0.31.50")
	postSignIn(t, a, base, "boss@example.test", "correct horse battery")
	var id int64
	if err := env.DB.QueryRow(t.Context(), `SELECT id FROM users WHERE email = $1`, u.email).Scan(&id); err != nil {
		t.Fatal(err)
	}
	page := fmt.Sprintf("%s/admin/users/%d", base, id)
	_, body := get(t, a, page)
	if !strings.Contains(body, `id="user-factors"`) || !strings.Contains(body, "Authenticator app") ||
		!strings.Contains(body, "10 recovery codes left") || !strings.Contains(body, fmt.Sprintf(`action="/admin/users/%d/mfa/remove"`, id)) {
		t.Fatalf("the account's page does not list its factor and the button:\n%s", body)
	}
	resp, _ := post(t, a, fmt.Sprintf("%s/admin/users/%d/mfa/remove", base, id), formType, "")
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "notice=factors-removed") {
		t.Fatalf("removing factors: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, body := get(t, a, page); !strings.Contains(body, "None") || strings.Contains(body, "/mfa/remove") {
		t.Error("the page still lists a factor or the button after removal")
	}
	if resp, _ := postSignIn(t, xcloaktest.Client(t, "127.0.31.51"), base, u.email, u.password); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("sign-in after removal: %d; want 303 with the password alone", resp.StatusCode)
	}
}
