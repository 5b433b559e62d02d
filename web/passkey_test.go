package web_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

var b64 = base64.RawURLEncoding

// enrolPasskey makes an account and registers k for it through the
// account pages, from a browser of its own.
func enrolPasskey(t *testing.T, env *xcloaktest.Env, base, email string, k *authtest.SoftKey) {
	t.Helper()
	env.AddUser(t, email, "correct horse battery", false)
	c := xcloaktest.Client(t, "127.0.31.1")
	if resp, body := postSignIn(t, c, base, email, "correct horse battery"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in before enrolment: %d %s", resp.StatusCode, body)
	}
	resp, options := post(t, c, base+"/account/mfa/passkey/options", "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("registration options: %d %s", resp.StatusCode, options)
	}
	form := url.Values{"name": {"Laptop"}, "password": {"correct horse battery"}, "credential": {k.Create(t, options)}}
	resp, page := post(t, c, base+"/account/mfa/passkey", formType, form.Encode())
	if resp.StatusCode != http.StatusOK || len(recoveryRe.FindAllString(page, -1)) != auth.RecoveryCodes {
		t.Fatalf("registration: %d, want 200 and %d recovery codes: %s", resp.StatusCode, auth.RecoveryCodes, page)
	}
}

// passkeyOptions begins a passwordless sign-in for c.
func passkeyOptions(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	resp, body := post(t, c, base+"/api/v1/login/passkey/options", jsonType, "{}")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("passkey options: %d %s", resp.StatusCode, body)
	}
	return body
}

func passkeySignIn(t *testing.T, c *http.Client, base, credential string) (*http.Response, string) {
	t.Helper()
	return post(t, c, base+"/api/v1/login/passkey", jsonType, `{"credential":`+credential+`}`)
}

// TestPasskeySignInAlone: a registered passkey signs a new browser in with
// no password; its ceremony is answered once, from the browser that began
// it; a counter gone back, another key's signature and an unknown
// credential are all refused with one answer.
func TestPasskeySignInAlone(t *testing.T) {
	env, base, _ := mfaEnv(t, xcloaktest.Options{})
	k := authtest.NewSoftKey(t)
	enrolPasskey(t, env, base, "pia@example.com", k)

	c := xcloaktest.Client(t, "127.0.31.2")
	assertion := k.Get(t, passkeyOptions(t, c, base), 1, nil)
	resp, body := passkeySignIn(t, c, base, assertion)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("passkey sign-in: %d %s", resp.StatusCode, body)
	}
	if resp, body := get(t, c, base+"/account"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "pia@example.com") {
		t.Fatalf("account after passkey sign-in: %d", resp.StatusCode)
	}

	// The same answer again: the ceremony is spent.
	replay := xcloaktest.Client(t, "127.0.31.3")
	opts := passkeyOptions(t, replay, base)
	if resp, body := passkeySignIn(t, replay, base, assertion); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an assertion of another challenge: %d %s, want 401", resp.StatusCode, body)
	}
	// The options of one browser answered from another: no ceremony there.
	thief := xcloaktest.Client(t, "127.0.31.4")
	if resp, body := passkeySignIn(t, thief, base, k.Get(t, opts, 1, nil)); resp.StatusCode != http.StatusBadRequest || errorCode(t, body) != "invalid_token" {
		t.Errorf("a ceremony answered from another browser: %d %s, want 400 invalid_token", resp.StatusCode, body)
	}

	var answers []string
	for _, tc := range []struct {
		name string
		make func(opts string) string
	}{
		{"counter gone back", func(opts string) string { return k.Get(t, opts, -1, nil) }},
		{"another key's signature", func(opts string) string { return k.Get(t, opts, 5, authtest.NewSoftKey(t)) }},
		{"unknown credential", func(opts string) string { return authtest.NewSoftKey(t).Get(t, opts, 1, nil) }},
	} {
		c := xcloaktest.Client(t, "127.0.31.5")
		resp, body := passkeySignIn(t, c, base, tc.make(passkeyOptions(t, c, base)))
		if resp.StatusCode != http.StatusUnauthorized || errorCode(t, body) != "invalid_passkey" {
			t.Errorf("%s: %d %s, want 401 invalid_passkey", tc.name, resp.StatusCode, body)
		}
		answers = append(answers, body)
	}
	for _, a := range answers[1:] {
		if a != answers[0] {
			t.Errorf("refusals differ: %q and %q", answers[0], a)
		}
	}
	env.Flush(t)
	var regressed int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM security_events WHERE kind = $1`, auth.EventPasskeyCloned).Scan(&regressed); err != nil || regressed != 1 {
		t.Errorf("%d counter regressions recorded (%v), want 1", regressed, err)
	}
	// The counter moved on is still accepted.
	c = xcloaktest.Client(t, "127.0.31.6")
	if resp, body := passkeySignIn(t, c, base, k.Get(t, passkeyOptions(t, c, base), 10, nil)); resp.StatusCode != http.StatusOK {
		t.Errorf("after the refusals: %d %s, want 200", resp.StatusCode, body)
	}
}

// TestPasskeySignInLimited: passwordless assertions are counted by the
// second step's rules before they are verified: past mfa_account's count
// of wrong ones in a row, even the right passkey is refused 429, from any
// network.
func TestPasskeySignInLimited(t *testing.T) {
	env, base, _ := mfaEnv(t, xcloaktest.Options{})
	k := authtest.NewSoftKey(t)
	enrolPasskey(t, env, base, "quin@example.com", k)
	limit := auth.DefaultLimits()[auth.RuleMFAAccount].Count
	c := xcloaktest.Client(t, "127.0.32.1")
	for i := 1; i <= limit; i++ {
		resp, body := passkeySignIn(t, c, base, k.Get(t, passkeyOptions(t, c, base), 1, authtest.NewSoftKey(t)))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong assertion %d: %d %s, want 401", i, resp.StatusCode, body)
		}
	}
	other := xcloaktest.Client(t, "127.0.33.1")
	resp, body := passkeySignIn(t, other, base, k.Get(t, passkeyOptions(t, other, base), 1, nil))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the right passkey after %d wrong: %d %s, want 429 with Retry-After", limit, resp.StatusCode, body)
	}
}

// TestPasskeySecondStep: after the right password, the JSON API's second
// step is answered with the account's passkey; before it, the options
// route says nothing of the account.
func TestPasskeySecondStep(t *testing.T) {
	env, base, _ := mfaEnv(t, xcloaktest.Options{})
	k := authtest.NewSoftKey(t)
	enrolPasskey(t, env, base, "rui@example.com", k)

	c := xcloaktest.Client(t, "127.0.34.1")
	resp, body := post(t, c, base+"/api/v1/login", jsonType, loginJSON("rui@example.com", "correct horse battery"))
	var step struct {
		Status   string `json:"status"`
		MFAToken string `json:"mfa_token"`
	}
	if err := json.Unmarshal([]byte(body), &step); err != nil || resp.StatusCode != http.StatusOK || step.Status != "mfa_required" {
		t.Fatalf("password: %d %s, want mfa_required", resp.StatusCode, body)
	}
	tokenJSON := `{"mfa_token":"` + step.MFAToken + `"}`
	// Another browser with the token alone gets nothing.
	if resp, body := post(t, xcloaktest.Client(t, "127.0.34.2"), base+"/api/v1/login/mfa/webauthn/options", jsonType, tokenJSON); resp.StatusCode != http.StatusBadRequest || errorCode(t, body) != "invalid_token" {
		t.Errorf("options without the step's cookie: %d %s, want 400 invalid_token", resp.StatusCode, body)
	}
	resp, opts := post(t, c, base+"/api/v1/login/mfa/webauthn/options", jsonType, tokenJSON)
	if resp.StatusCode != http.StatusOK || !strings.Contains(opts, b64.EncodeToString(k.ID)) {
		t.Fatalf("second-step options: %d %s, want the passkey allowed", resp.StatusCode, opts)
	}
	finish := `{"mfa_token":"` + step.MFAToken + `","credential":` + k.Get(t, opts, 1, nil) + `}`
	resp, body = post(t, c, base+"/api/v1/login/mfa/webauthn", jsonType, finish)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("second step with the passkey: %d %s", resp.StatusCode, body)
	}
	if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusOK {
		t.Errorf("account after the second step: %d", resp.StatusCode)
	}
	// The step is spent.
	if resp, body := post(t, c, base+"/api/v1/login/mfa/webauthn", jsonType, finish); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("the step again: %d %s, want 400", resp.StatusCode, body)
	}
}

// TestPasskeyOptionsLimited: beginning a sign-in with a passkey stores a
// ceremony, so it is limited per client network before anything is
// stored: past the limit, 429 with Retry-After, and no more ceremonies.
func TestPasskeyOptionsLimited(t *testing.T) {
	_, base, _ := mfaEnv(t, xcloaktest.Options{})
	limit := auth.DefaultLimits()[auth.RulePasskeyOptionsIP].Count
	c := xcloaktest.Client(t, "127.0.34.1")
	for range limit {
		passkeyOptions(t, c, base)
	}
	resp, body := post(t, c, base+"/api/v1/login/passkey/options", jsonType, "{}")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("options past the limit of %d: %d %s, want 429 with Retry-After", limit, resp.StatusCode, body)
	}
	// Another network is not held by this one's count.
	passkeyOptions(t, xcloaktest.Client(t, "127.0.35.1"), base)
}

// TestPasskeysOffered: the sign-in page offers "Sign in with a passkey",
// and the second factors' page "Add a passkey", only where passkeys are
// on; at a public URL with an IP address, where browsers offer no
// WebAuthn, neither shows, and the registration page sends back to the
// list.
func TestPasskeysOffered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		public string
		on     bool
	}{
		{"domain name", "", true},
		{"IP address", "http://127.0.0.1:8080/", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := xcloaktest.Options{}
			if tc.public != "" {
				o.Auth = func(c *auth.Config) { c.PublicURL, _ = url.Parse(tc.public) }
			}
			env, base, _ := mfaEnv(t, o)
			email := strings.ReplaceAll(tc.name, " ", "") + "@offered.example.com"
			env.AddUser(t, email, "correct horse battery", false)
			c := xcloaktest.Client(t, "127.0.36.1")
			_, page := get(t, c, base+"/login")
			if got := strings.Contains(page, `id="passkey-sign-in"`); got != tc.on {
				t.Errorf("sign-in page offers a passkey: %v, want %v", got, tc.on)
			}
			_, page = postSignIn(t, c, base, email, "wrong password")
			if got := strings.Contains(page, `id="passkey-sign-in"`); got != tc.on {
				t.Errorf("sign-in page after a wrong password offers a passkey: %v, want %v", got, tc.on)
			}
			if resp, body := postSignIn(t, c, base, email, "correct horse battery"); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("sign-in: %d %s", resp.StatusCode, body)
			}
			_, page = get(t, c, base+"/account/mfa")
			if got := strings.Contains(page, `id="add-passkey-link"`); got != tc.on {
				t.Errorf("factors page offers a passkey: %v, want %v", got, tc.on)
			}
			resp, _ := get(t, c, base+"/account/mfa/passkey")
			if tc.on && resp.StatusCode != http.StatusOK {
				t.Errorf("registration page: %d, want 200", resp.StatusCode)
			}
			if !tc.on && (resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account/mfa") {
				t.Errorf("registration page with passkeys off: %d to %q, want 303 to /account/mfa", resp.StatusCode, resp.Header.Get("Location"))
			}
			if !tc.on {
				if resp, body := post(t, c, base+"/api/v1/login/passkey/options", jsonType, "{}"); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `"passkeys_off"`) {
					// Not a 5xx: a server configured without passkeys is
					// not failing, and a client calling it must not page
					// anyone.
					t.Errorf("passkey sign-in options with passkeys off: %d %s, want 404 passkeys_off", resp.StatusCode, body)
				}
			}
		})
	}
}

// rpIDOf reads rp.id from registration options.
func rpIDOf(t *testing.T, options string) string {
	t.Helper()
	var o struct {
		PublicKey struct {
			RP struct {
				ID string `json:"id"`
			} `json:"rp"`
		} `json:"publicKey"`
	}
	if err := json.Unmarshal([]byte(options), &o); err != nil {
		t.Fatalf("options %s: %v", options, err)
	}
	return o.PublicKey.RP.ID
}

// TestPasskeyRelyingParty: the RP ID and origins configured are the ones
// ceremonies use: the options name the RP ID, a passkey made for it from
// another listed origin registers and signs in, and one answered from an
// origin not listed is refused.
func TestPasskeyRelyingParty(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		env, base, _ := mfaEnv(t, xcloaktest.Options{})
		env.AddUser(t, "rpd@example.com", "correct horse battery", false)
		c := xcloaktest.Client(t, "127.0.37.1")
		postSignIn(t, c, base, "rpd@example.com", "correct horse battery")
		_, options := post(t, c, base+"/account/mfa/passkey/options", "", "")
		if got := rpIDOf(t, options); got != authtest.SoftRPID {
			t.Errorf("rp.id = %q, want the public URL's host %q", got, authtest.SoftRPID)
		}
	})
	t.Run("configured", func(t *testing.T) {
		env, base, _ := mfaEnv(t, xcloaktest.Options{Auth: func(c *auth.Config) {
			c.WebAuthn = auth.WebAuthnConfig{RPID: "example.test", Origins: []string{authtest.SoftOrigin, "https://app.example.test"}}
		}})
		env.AddUser(t, "rpc@example.com", "correct horse battery", false)
		c := xcloaktest.Client(t, "127.0.37.2")
		postSignIn(t, c, base, "rpc@example.com", "correct horse battery")
		_, options := post(t, c, base+"/account/mfa/passkey/options", "", "")
		if got := rpIDOf(t, options); got != "example.test" {
			t.Fatalf("rp.id = %q, want example.test", got)
		}
		k := authtest.NewSoftKey(t)
		k.RPID, k.Origin = "example.test", "https://app.example.test"
		form := url.Values{"name": {"App"}, "password": {"correct horse battery"}, "credential": {k.Create(t, options)}}
		if resp, page := post(t, c, base+"/account/mfa/passkey", formType, form.Encode()); resp.StatusCode != http.StatusOK {
			t.Fatalf("registration from a listed origin: %d %s", resp.StatusCode, page)
		}
		k.Origin = "https://evil.example.test"
		other := xcloaktest.Client(t, "127.0.37.3")
		if resp, body := passkeySignIn(t, other, base, k.Get(t, passkeyOptions(t, other, base), 1, nil)); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("an assertion from an origin not listed: %d %s, want 401", resp.StatusCode, body)
		}
		k.Origin = authtest.SoftOrigin
		if resp, body := passkeySignIn(t, other, base, k.Get(t, passkeyOptions(t, other, base), 1, nil)); resp.StatusCode != http.StatusOK {
			t.Errorf("an assertion from the public URL's origin: %d %s, want 200", resp.StatusCode, body)
		}
	})
}

// TestPasskeyEnrolFormFailures: the registration form answers a name too
// long, one with a control or invisible character (a direction override
// would turn the rest of the administrators' line about the account's
// factors around), and a wrong password with its own page and what went
// wrong, the name kept.
func TestPasskeyEnrolFormFailures(t *testing.T) {
	env, base, _ := mfaEnv(t, xcloaktest.Options{})
	env.AddUser(t, "pkform@example.com", "correct horse battery", false)
	c := xcloaktest.Client(t, "127.0.38.1")
	postSignIn(t, c, base, "pkform@example.com", "correct horse battery")
	k := authtest.NewSoftKey(t)
	for _, tc := range []struct {
		name, password string
		status         int
		says           string
	}{
		{strings.Repeat("n", 65), "correct horse battery", http.StatusBadRequest, "Name the passkey in at most 64 characters"},
		{"Laptop\u202e", "correct horse battery", http.StatusBadRequest, "Name the passkey in at most 64 characters"},
		{"Lap\u200btop", "correct horse battery", http.StatusBadRequest, "Name the passkey in at most 64 characters"},
		{"Lap\ntop", "correct horse battery", http.StatusBadRequest, "Name the passkey in at most 64 characters"},
		{"Laptop", "not the password", http.StatusUnauthorized, "Your password is incorrect."},
	} {
		_, options := post(t, c, base+"/account/mfa/passkey/options", "", "")
		form := url.Values{"name": {tc.name}, "password": {tc.password}, "credential": {k.Create(t, options)}}
		resp, page := post(t, c, base+"/account/mfa/passkey", formType, form.Encode())
		if resp.StatusCode != tc.status || !strings.Contains(page, tc.says) {
			t.Errorf("name %.10q…, password %q: %d, want %d saying %q: %s", tc.name, tc.password, resp.StatusCode, tc.status, tc.says, page)
		}
	}
}

// TestPasskeySignInHostileCredentials: malformed, truncated and tampered
// credentials sent to the passwordless route are refused, never with a
// 5xx, and sign nobody in.
func TestPasskeySignInHostileCredentials(t *testing.T) {
	env, base, _ := mfaEnv(t, xcloaktest.Options{})
	k := authtest.NewSoftKey(t)
	enrolPasskey(t, env, base, "hj@example.com", k)
	id := b64.EncodeToString(k.ID)
	mutate := func(opts string, f func(m map[string]any)) string {
		var m map[string]any
		json.Unmarshal([]byte(k.Get(t, opts, 1, nil)), &m)
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	resp := func(m map[string]any) map[string]any { return m["response"].(map[string]any) }
	cases := map[string]func(opts string) string{
		"null":        func(string) string { return "null" },
		"string":      func(string) string { return `"x"` },
		"array":       func(string) string { return `[]` },
		"empty":       func(string) string { return `{}` },
		"deep":        func(string) string { return strings.Repeat("[", 5000) + strings.Repeat("]", 5000) },
		"no response": func(string) string { return `{"id":"` + id + `","rawId":"` + id + `","type":"public-key"}` },
		"short authData": func(o string) string {
			return mutate(o, func(m map[string]any) { resp(m)["authenticatorData"] = "AAAA" })
		},
		"no userHandle": func(o string) string { return mutate(o, func(m map[string]any) { delete(resp(m), "userHandle") }) },
		"userHandle huge": func(o string) string {
			return mutate(o, func(m map[string]any) { resp(m)["userHandle"] = strings.Repeat("A", 8000) })
		},
		"clientData not json": func(o string) string {
			return mutate(o, func(m map[string]any) { resp(m)["clientDataJSON"] = b64.EncodeToString([]byte("{{{")) })
		},
		"rawId differs": func(o string) string {
			return mutate(o, func(m map[string]any) { m["rawId"] = b64.EncodeToString([]byte("other")) })
		},
		"signature empty": func(o string) string { return mutate(o, func(m map[string]any) { resp(m)["signature"] = "" }) },
		"authData extensions flag": func(o string) string {
			return mutate(o, func(m map[string]any) {
				ad, _ := b64.DecodeString(resp(m)["authenticatorData"].(string))
				ad[32] |= 0xC0 // AT and ED flags, no data
				resp(m)["authenticatorData"] = b64.EncodeToString(ad)
			})
		},
		"extensions": func(o string) string {
			return mutate(o, func(m map[string]any) { m["clientExtensionResults"] = map[string]any{"appid": true, "x": []any{1, 2}} })
		},
	}
	i := 0
	for name, make := range cases {
		i++
		c := xcloaktest.Client(t, fmt.Sprint("127.0.32.", i))
		opts := passkeyOptions(t, c, base)
		r, body := passkeySignIn(t, c, base, make(opts))
		t.Logf("%-24s %d %s", name, r.StatusCode, strings.TrimSpace(body))
		if r.StatusCode >= 500 {
			t.Errorf("%s: %d", name, r.StatusCode)
		}
		if r.StatusCode == http.StatusOK {
			t.Errorf("%s signed in", name)
		}
	}
}
