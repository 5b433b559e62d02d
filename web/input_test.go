package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestBadInput: every malformed request gets a clear 4xx, never a 500.
func TestBadInput(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	long := strings.Repeat("a", 3000)
	for _, tc := range []struct {
		name, method, path, ctype, body string
		want                            int
		wantJSON                        string
	}{
		{"json: empty body", "POST", "/api/v1/login", jsonType, "", 400, "invalid_request"},
		{"json: not json", "POST", "/api/v1/login", jsonType, "email=a", 400, "invalid_request"},
		{"json: array", "POST", "/api/v1/login", jsonType, `[]`, 400, "invalid_request"},
		{"json: null", "POST", "/api/v1/login", jsonType, `null`, 400, "invalid_request"},
		// encoding/json decodes null into a struct as nothing at all, as if
		// it were {}: it is no object, and is refused as malformed, never
		// taken for a body whose fields are empty (a token not found).
		{"json: null for a reset", "POST", "/api/v1/password-reset/confirm", jsonType, `null`, 400, "invalid_request"},
		{"json: null for an unlock", "POST", "/api/v1/unlock/confirm", jsonType, ` null `, 400, "invalid_request"},
		{"json: null for a sign-in link", "POST", "/api/v1/sign-in/confirm", jsonType, "null\n", 400, "invalid_request"},
		{"json: null for a second step", "POST", "/api/v1/login/mfa/webauthn/options", jsonType, `null`, 400, "invalid_request"},
		{"json: number for email", "POST", "/api/v1/login", jsonType, `{"email":5,"password":"x"}`, 400, "invalid_request"},
		{"json: unknown field", "POST", "/api/v1/login", jsonType, `{"email":"ann@example.com","password":"x","admin":true}`, 400, "invalid_request"},
		{"json: trailing data", "POST", "/api/v1/login", jsonType, `{"email":"ann@example.com","password":"x"} {}`, 400, "invalid_request"},
		// A key given twice is refused, not resolved: the last would win in
		// the handler, and a proxy or log in front may read the first.
		{"json: email twice", "POST", "/api/v1/login", jsonType, `{"email":"eve@example.com","email":"ann@example.com","password":"correct horse"}`, 400, "invalid_request"},
		{"json: password twice", "POST", "/api/v1/login", jsonType, `{"email":"ann@example.com","password":"x","password":"correct horse"}`, 400, "invalid_request"},
		{"json: key in another case", "POST", "/api/v1/login", jsonType, `{"EMAIL":"ann@example.com","password":"correct horse"}`, 400, "invalid_request"},
		{"json: key in another case, escaped", "POST", "/api/v1/password-reset", jsonType, `{"\u0045mail":"ann@example.com"}`, 400, "invalid_request"},
		// Bodies with a field other than a string are read by
		// encoding/json alone, whose names are not case-sensitive either.
		{"json: second step's key in another case", "POST", "/api/v1/login/mfa", jsonType, `{"mfa_token":"nope","CODE":"123456"}`, 400, "invalid_request"},
		{"json: second step's remember in another case", "POST", "/api/v1/login/mfa", jsonType, `{"mfa_token":"nope","code":"123456","Remember":true}`, 400, "invalid_request"},
		{"json: passkey's credential in another case", "POST", "/api/v1/login/passkey", jsonType, `{"Credential":{}}`, 400, "invalid_request"},
		{"json: passkey step's key in another case", "POST", "/api/v1/login/mfa/webauthn", jsonType, `{"MFA_TOKEN":"nope","credential":{}}`, 400, "invalid_request"},
		{"json: key twice in another case", "POST", "/api/v1/login", jsonType, `{"email":"ann@example.com","password":"x","Password":"correct horse"}`, 400, "invalid_request"},
		{"json: key twice, once escaped", "POST", "/api/v1/login", jsonType, `{"email":"eve@example.com","em\u0061il":"ann@example.com","password":"correct horse"}`, 400, "invalid_request"},
		{"json: reset email twice", "POST", "/api/v1/password-reset", jsonType, `{"email":"eve@example.com","email":"ann@example.com"}`, 400, "invalid_request"},
		{"json: confirm token twice", "POST", "/api/v1/password-reset/confirm", jsonType, `{"token":"a","token":"b","password":"new password 1"}`, 400, "invalid_request"},
		{"json: invalid UTF-8", "POST", "/api/v1/login", jsonType, "{\"email\":\"ann@example.com\",\"password\":\"\xff\"}", 400, "invalid_request"},
		{"json: NUL in password", "POST", "/api/v1/login", jsonType, `{"email":"ann@example.com","password":"a\u0000b"}`, 400, "invalid_request"},
		// encoding/json would read a lone UTF-16 surrogate as U+FFFD, so
		// that "\ud800" and "\udc00" would be one password.
		{"json: lone high surrogate", "POST", "/api/v1/login", jsonType, `{"email":"ann@example.com","password":"a\ud800b"}`, 400, "invalid_request"},
		{"json: lone low surrogate", "POST", "/api/v1/login", jsonType, `{"email":"ann@example.com","password":"\udc00"}`, 400, "invalid_request"},
		{"json: surrogates in the wrong order", "POST", "/api/v1/password-reset", jsonType, `{"email":"ann\udc00\ud800@example.com"}`, 400, "invalid_request"},
		{"json: NUL in email", "POST", "/api/v1/login", jsonType, `{"email":"ann\u0000@example.com","password":"x"}`, 400, "invalid_request"},
		{"json: missing password", "POST", "/api/v1/login", jsonType, `{"email":"ann@example.com"}`, 400, "invalid_request"},
		{"json: bad email", "POST", "/api/v1/login", jsonType, `{"email":"not an email","password":"x"}`, 400, "invalid_request"},
		{"json: email over 254 bytes", "POST", "/api/v1/login", jsonType, `{"email":"` + strings.Repeat("a", 250) + `@example.com","password":"x"}`, 400, "invalid_request"},
		{"json: password over 1024 bytes", "POST", "/api/v1/login", jsonType, `{"email":"ann@example.com","password":"` + strings.Repeat("p", 1025) + `"}`, 400, "invalid_request"},
		{"json: field over 2 KiB", "POST", "/api/v1/login", jsonType, `{"email":"ann@example.com","password":"` + long + `"}`, 400, "invalid_request"},
		{"json: body over 64 KiB", "POST", "/api/v1/login", jsonType, `{"email":"ann@example.com","password":"` + strings.Repeat("p", 70<<10) + `"}`, 400, "invalid_request"},
		{"json: wrong content type", "POST", "/api/v1/login", "text/plain", `{"email":"ann@example.com","password":"x"}`, 400, "invalid_request"},
		{"json: form content type", "POST", "/api/v1/login", formType, `email=ann@example.com&password=x`, 400, "invalid_request"},
		{"json: no content type", "POST", "/api/v1/login", "", `{"email":"ann@example.com","password":"x"}`, 400, "invalid_request"},
		{"json: reset with bad email", "POST", "/api/v1/password-reset", jsonType, `{"email":"@"}`, 400, "invalid_request"},
		{"json: reset confirm bad token", "POST", "/api/v1/password-reset/confirm", jsonType, `{"token":"nope","password":"a long password"}`, 400, "invalid_token"},
		{"json: reset confirm garbage", "POST", "/api/v1/password-reset/confirm", jsonType, `{"token":`, 400, "invalid_request"},
		{"form: wrong content type", "POST", "/login", jsonType, `{}`, 400, ""},
		{"form: invalid UTF-8", "POST", "/login", formType, "email=ann%40example.com&password=%ff", 400, ""},
		{"form: NUL", "POST", "/login", formType, "email=ann%40example.com&password=a%00b", 400, ""},
		{"form: duplicate field", "POST", "/login", formType, "email=ann%40example.com&email=b%40example.com&password=x", 400, ""},
		{"form: bad escape", "POST", "/login", formType, "email=%zz&password=x", 400, ""},
		{"form: empty", "POST", "/login", formType, "", 400, ""},
		{"form: reset bad email", "POST", "/password-reset", formType, url.Values{"email": {"x"}}.Encode(), 400, ""},
		{"form: reset confirm mismatch", "POST", "/password-reset/" + strings.Repeat("A", 43), formType, url.Values{"password": {"a long password"}, "password_confirm": {"another one"}}.Encode(), 400, ""},
		{"form: reset confirm bad token", "POST", "/password-reset/nope", formType, url.Values{"password": {"a long password"}, "password_confirm": {"a long password"}}.Encode(), 400, ""},
		{"page: reset with bad token", "GET", "/password-reset/nope", "", "", 400, ""},
		{"page: reset with unknown token", "GET", "/password-reset/" + strings.Repeat("A", 43), "", "", 400, ""},
		{"method: GET api", "GET", "/api/v1/login", "", "", 405, "method_not_allowed"},
		{"method: DELETE attempts", "DELETE", "/api/v1/attempts", "", "", 405, "method_not_allowed"},
		{"unknown api path", "GET", "/api/v1/nope", "", "", 404, "not_found"},
		{"unknown api path, POST", "POST", "/api/v2/attempts", jsonType, `{}`, 404, "not_found"},
		// net/http's mux would redirect a path it cleans; the API answers it
		// as the unknown path it is, in JSON, and redirects no POST.
		{"api path with an empty segment", "POST", "/api/v1/attempts//outcome", jsonType, `{"outcome":"success"}`, 404, "not_found"},
		{"api path with a dot segment", "POST", "/api/v1/./login", jsonType, `{}`, 404, "not_found"},
		{"api path with a trailing slash", "POST", "/api/v1/login/", jsonType, `{}`, 404, "not_found"},
		{"method: PUT login", "PUT", "/login", formType, "", 405, ""},
		{"unknown path", "GET", "/nope", "", "", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, base+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			resp, body := do(t, xcloaktest.Client(t, "127.0.5.1"), req)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d; body %.200s", resp.StatusCode, tc.want, body)
			}
			if tc.wantJSON != "" && !strings.Contains(body, `"error":"`+tc.wantJSON+`"`) {
				t.Fatalf("body %.200s, want error %q", body, tc.wantJSON)
			}
		})
	}
}

// TestContentTypeSentTwiceIsRefused: Content-Type is one value (RFC 9110,
// 8.3). A request that sends two is refused before any work, as a body of
// the wrong type is, whichever comes first: a gateway in front that reads
// the other one would check the body as a type the service does not read
// it as.
func TestContentTypeSentTwiceIsRefused(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	apiKey := env.AddAPIKey(t, "twice")
	for _, tc := range []struct {
		name, path string
		types      []string
		body       string
	}{
		{"json, then text", "/api/v1/login", []string{jsonType, "text/plain"}, loginJSON("ann@example.com", "correct horse")},
		{"text, then json", "/api/v1/login", []string{"text/plain", jsonType}, loginJSON("ann@example.com", "correct horse")},
		{"json twice", "/api/v1/login", []string{jsonType, jsonType}, loginJSON("ann@example.com", "correct horse")},
		{"decision api", "/api/v1/attempts", []string{jsonType, "text/plain"}, `{"kind":"login","account":"ann@example.com","client_ip":"192.0.2.1"}`},
		{"form, then json", "/login", []string{formType, jsonType}, url.Values{"email": {"ann@example.com"}, "password": {"correct horse"}}.Encode()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header["Content-Type"] = tc.types
			if strings.HasPrefix(tc.path, "/api/v1/attempts") {
				req.Header.Set("Authorization", "Bearer "+apiKey)
			}
			resp, body := do(t, xcloaktest.Client(t, "127.0.5.2"), req)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body %.200s", resp.StatusCode, body)
			}
		})
	}
}

// TestEncodedBodyIsRefused: the service reads bodies as sent, and decodes
// no Content-Encoding. A body that says it is compressed is refused with
// 400, never read as if it were not: whatever reads it on the way would
// decompress it, or fail to, and check another body than the one the
// service acts on.
func TestEncodedBodyIsRefused(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	apiKey := env.AddAPIKey(t, "encoded")
	for _, tc := range []struct {
		name, path, ctype, encoding, body string
	}{
		{"json, gzip", "/api/v1/login", jsonType, "gzip", loginJSON("ann@example.com", "correct horse")},
		{"json, br", "/api/v1/login", jsonType, "br", loginJSON("ann@example.com", "correct horse")},
		{"decision api, gzip", "/api/v1/attempts", jsonType, "gzip", `{"kind":"login","account":"ann@example.com","client_ip":"192.0.2.1"}`},
		{"form, deflate", "/login", formType, "deflate", url.Values{"email": {"ann@example.com"}, "password": {"correct horse"}}.Encode()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, xcloaktest.Client(t, "127.0.5.3"), base+tc.path, tc.ctype, tc.body,
				"Content-Encoding", tc.encoding, "Authorization", "Bearer "+apiKey)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body %.200s", resp.StatusCode, body)
			}
		})
	}
	// identity is no encoding at all.
	resp, body := post(t, xcloaktest.Client(t, "127.0.5.3"), base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "correct horse"), "Content-Encoding", "identity")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("identity: status %d, want 200; body %.200s", resp.StatusCode, body)
	}
}

// TestBodyInAnotherCharsetIsRefused: the service reads every body as
// UTF-8. A body whose Content-Type names another charset is refused with
// 400, never read as UTF-8 all the same: whatever reads it on the way (a
// gateway's filter, a log) would decode it by its charset and check
// another body than the one the service acts on, and an ASCII body in
// UTF-7 or a Latin-1 one that happens to be valid UTF-8 would be read as
// something its client did not send. utf-8 itself, in any case (and
// spelled utf8), is the body as it is read.
func TestBodyInAnotherCharsetIsRefused(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	apiKey := env.AddAPIKey(t, "charset")
	for _, tc := range []struct {
		name, path, ctype, body string
	}{
		{"json, Latin-1", "/api/v1/login", jsonType + "; charset=iso-8859-1", loginJSON("ann@example.com", "correct horse")},
		{"json, UTF-7", "/api/v1/login", jsonType + "; charset=utf-7", loginJSON("ann@example.com", "correct horse")},
		{"json, UTF-16", "/api/v1/login", jsonType + `; charset="UTF-16"`, loginJSON("ann@example.com", "correct horse")},
		{"json, empty charset", "/api/v1/login", jsonType + `; charset=""`, loginJSON("ann@example.com", "correct horse")},
		{"decision api, Latin-1", "/api/v1/attempts", jsonType + "; charset=latin1", `{"kind":"login","account":"ann@example.com","client_ip":"192.0.2.1"}`},
		{"form, Latin-1", "/login", formType + "; charset=ISO-8859-1", url.Values{"email": {"ann@example.com"}, "password": {"correct horse"}}.Encode()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, xcloaktest.Client(t, "127.0.5.4"), base+tc.path, tc.ctype, tc.body, "Authorization", "Bearer "+apiKey)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body %.200s", resp.StatusCode, body)
			}
			if strings.HasPrefix(tc.path, "/api/") && !strings.Contains(body, `"error":"invalid_request"`) {
				t.Fatalf("body %.200s, want error invalid_request", body)
			}
		})
	}
	for _, ctype := range []string{jsonType + "; charset=utf-8", jsonType + "; charset=UTF-8", jsonType + `;charset="utf-8"`, jsonType + "; charset=utf8"} {
		resp, body := post(t, xcloaktest.Client(t, "127.0.5.4"), base+"/api/v1/login", ctype, loginJSON("ann@example.com", "correct horse"))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d, want 200; body %.200s", ctype, resp.StatusCode, body)
		}
	}
}
