package web_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/web"
)

// openAPIFile is the document as kept in the repository.
func openAPIFile(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openAPIValidator validates the document against the OpenAPI 3.1 schema
// and returns a validator of requests and answers against it. Security is
// not checked: tests send the session cookie under its development name.
func openAPIValidator(t *testing.T) validator.Validator {
	t.Helper()
	doc, err := libopenapi.NewDocument(openAPIFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if v := doc.GetVersion(); !strings.HasPrefix(v, "3.1.") {
		t.Fatalf("document is OpenAPI %q, want 3.1", v)
	}
	v, errs := validator.NewValidator(doc, config.WithoutSecurityValidation(), config.WithFormatAssertions())
	if len(errs) > 0 {
		t.Fatalf("building the validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("document: %s: %s", e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				t.Errorf("  at %s: %s", se.FieldPath+" "+se.KeywordLocation, se.Reason)
			}
		}
		t.FailNow()
	}
	return v
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	openAPIValidator(t)
}

// TestOpenAPIDocumentsEveryRoute checks the document against routeTable
// both ways: every "METHOD /api/..." route is documented, and every
// documented operation is a route.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	doc, err := libopenapi.NewDocument(openAPIFile(t))
	if err != nil {
		t.Fatal(err)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, item := range model.Model.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().FromOldest() {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}

	routes := map[string]bool{}
	for _, p := range web.RoutePatterns(web.Config{Metrics: http.NotFoundHandler()}) {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			if strings.HasPrefix(p, "/api/") {
				t.Errorf("route %q names no method; an API route must", p)
			}
			continue
		}
		if strings.HasPrefix(path, "/api/") {
			routes[method+" "+openAPIPath(path)] = true
		}
	}
	for r := range routes {
		if !documented[r] {
			t.Errorf("route %s is not in web/openapi.json", r)
		}
	}
	for d := range documented {
		if !routes[d] {
			t.Errorf("web/openapi.json documents %s, which is no route", d)
		}
	}
	if len(routes) == 0 {
		t.Fatal("no API routes listed")
	}
}

// openAPIPath writes a ServeMux path as OpenAPI does: "{name...}" is
// "{name}", and "{$}" (the path's end) is dropped.
func openAPIPath(p string) string {
	p = strings.TrimSuffix(p, "{$}")
	var out strings.Builder
	for seg := range strings.SplitSeq(p, "/") {
		if out.Len() > 0 || strings.HasPrefix(p, "/") {
			out.WriteByte('/')
		}
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "...}") {
			seg = strings.TrimSuffix(seg, "...}") + "}"
		}
		out.WriteString(seg)
	}
	return strings.TrimPrefix(out.String(), "/")
}

func TestOpenAPIPath(t *testing.T) {
	for in, want := range map[string]string{
		"/api/v1/login":                          "/api/v1/login",
		"/api/v1/attempts/{attempt_id}/outcome":  "/api/v1/attempts/{attempt_id}/outcome",
		"/api/v1/files/{rest...}":                "/api/v1/files/{rest}",
		"/api/{$}":                               "/api/",
		"/api/v1/account/sessions/{id}":          "/api/v1/account/sessions/{id}",
		"/api/v1/authz/forward-auth":             "/api/v1/authz/forward-auth",
		"/api/v1/password-reset/confirm":         "/api/v1/password-reset/confirm",
		"/api/v1/attempts/{attempt_id}/outcome/": "/api/v1/attempts/{attempt_id}/outcome/",
	} {
		if got := openAPIPath(in); got != want {
			t.Errorf("openAPIPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	c := xcloaktest.Client(t, "127.0.0.1")
	resp, body := get(t, c, base+"/api/openapi.json")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || body != string(openAPIFile(t)) {
		t.Fatalf("GET /api/openapi.json: %d %q, %d bytes; want 200 application/json, the file", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	if cc := resp.Header.Get("Cache-Control"); !strings.HasPrefix(cc, "public, max-age=") {
		t.Errorf("Cache-Control %q, want a public max-age", cc)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/openapi.json", nil)
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	if resp, _ := do(t, c, req); resp.StatusCode != http.StatusNotModified {
		t.Errorf("GET with the ETag: %d, want 304", resp.StatusCode)
	}
}

// TestOpenAPIDescribesRealAnswers sends requests to a real XCloak and
// validates each request and its answer against the document.
func TestOpenAPIDescribesRealAnswers(t *testing.T) {
	v := openAPIValidator(t)
	env := xcloaktest.New(t, xcloaktest.Options{
		Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 2) },
		Web: func(c *web.Config) {
			c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
			c.ProtectedHosts = mustHosts(t, "app.example.test")
		},
	})
	base := env.Start(t)
	env.AddUser(t, "admin@example.test", "admin-password-1", true)
	env.AddUser(t, "ann@example.test", "ann-password-1", false)
	key := env.AddAPIKey(t, "shop")
	browser := xcloaktest.Client(t, "127.0.0.1")
	bearer := []string{"Authorization", "Bearer " + key}

	// check sends one request, wants status, validates both, and returns
	// the answer's body.
	check := func(name string, c *http.Client, method, path, body string, status int, header ...string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != status {
			t.Fatalf("%s: %d %s, want %d", name, resp.StatusCode, b, status)
		}
		// The validator reads both bodies again. A request made to be
		// refused as malformed is not one the document allows; only its
		// answer is checked.
		req.Body = io.NopCloser(strings.NewReader(body))
		resp.Body = io.NopCloser(bytes.NewReader(b))
		validate := v.ValidateHttpRequestResponse
		if status == http.StatusBadRequest {
			validate = v.ValidateHttpResponse
		}
		if ok, errs := validate(req, resp); !ok {
			for _, e := range errs {
				t.Errorf("%s (%d %s): %s: %s", name, resp.StatusCode, b, e.Message, e.Reason)
				for _, se := range e.SchemaValidationErrors {
					t.Errorf("  at %s: %s", se.FieldPath+" "+se.KeywordLocation, se.Reason)
				}
			}
		}
		return string(b)
	}

	check("login, wrong password", browser, "POST", "/api/v1/login", `{"email":"ann@example.test","password":"wrong-password"}`, 401)
	check("login, wrong password again", browser, "POST", "/api/v1/login", `{"email":"ann@example.test","password":"wrong-password"}`, 401)
	check("login, over the account's limit", browser, "POST", "/api/v1/login", `{"email":"ann@example.test","password":"ann-password-1"}`, 429)
	check("login, malformed", browser, "POST", "/api/v1/login", `{"email":"admin@example.test"}`, 400)
	check("login", browser, "POST", "/api/v1/login", `{"email":"admin@example.test","password":"admin-password-1"}`, 200)

	check("stats, bad period", browser, "GET", "/api/v1/admin/stats?period=2h", "", 400)
	check("sessions", browser, "GET", "/api/v1/account/sessions", "", 200)
	check("activity", browser, "GET", "/api/v1/account/activity?limit=5", "", 200)
	check("reset request", browser, "POST", "/api/v1/password-reset", `{"email":"nobody@example.test"}`, 202)
	check("reset confirm, bad token", browser, "POST", "/api/v1/password-reset/confirm", `{"token":"nothing","password":"a-new-password-1"}`, 400)
	check("sign-in confirm, bad token", browser, "POST", "/api/v1/sign-in/confirm", `{"token":"nothing"}`, 400)
	check("unlock request", browser, "POST", "/api/v1/unlock", `{"email":"ann@example.test"}`, 202)
	check("unlock confirm, bad token", browser, "POST", "/api/v1/unlock/confirm", `{"token":"nothing"}`, 400)
	check("password change, wrong current password", browser, "POST", "/api/v1/account/password", `{"current_password":"not-it-at-all","new_password":"a-new-password-1"}`, 401)
	check("end a session that is not listed", browser, "DELETE", "/api/v1/account/sessions/nothing", "", 404)

	check("auth-request, signed in", browser, "GET", "/api/v1/authz/auth-request", "", 200, "X-Original-URL", "https://app.example.test/page")
	stranger := xcloaktest.Client(t, "127.0.0.2")
	check("stats, no session", stranger, "GET", "/api/v1/admin/stats", "", 401)
	check("sessions, no session", stranger, "GET", "/api/v1/account/sessions", "", 401)
	check("auth-request, no session", stranger, "GET", "/api/v1/authz/auth-request", "", 401, "X-Original-URL", "https://app.example.test/page")
	check("forward-auth, no session", stranger, "GET", "/api/v1/authz/forward-auth", "", 302,
		"X-Forwarded-Method", "GET", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "app.example.test", "X-Forwarded-Uri", "/page")
	check("forward-auth, another host", browser, "GET", "/api/v1/authz/forward-auth", "", 403,
		"X-Forwarded-Proto", "https", "X-Forwarded-Host", "evil.example.test", "X-Forwarded-Uri", "/")

	app := xcloaktest.Client(t, "127.0.0.3")
	attempt := func(ip string) string { return `{"kind":"login","account":"bob","client_ip":"` + ip + `"}` }
	var allowed struct {
		AttemptID string `json:"attempt_id"`
	}
	if err := json.Unmarshal([]byte(check("attempt", app, "POST", "/api/v1/attempts", attempt("192.0.2.1"), 200, bearer...)), &allowed); err != nil {
		t.Fatal(err)
	}
	check("outcome", app, "POST", "/api/v1/attempts/"+allowed.AttemptID+"/outcome", `{"result":"failure"}`, 204, bearer...)
	check("outcome, bad result", app, "POST", "/api/v1/attempts/"+allowed.AttemptID+"/outcome", `{"result":"maybe"}`, 400, bearer...)
	check("attempt, with a device", app, "POST", "/api/v1/attempts", `{"kind":"reset","account":"carol","client_ip":"2001:db8::1","device":"d-1"}`, 200, bearer...)
	check("attempt, again", app, "POST", "/api/v1/attempts", attempt("192.0.2.2"), 200, bearer...)
	check("attempt, over the account's limit", app, "POST", "/api/v1/attempts", attempt("192.0.2.3"), 429, bearer...)
	check("attempt, bad address", app, "POST", "/api/v1/attempts", attempt("192.0.2.300"), 400, bearer...)
	check("attempt, no key", app, "POST", "/api/v1/attempts", attempt("192.0.2.4"), 401)
	check("outcome, unknown attempt", app, "POST", "/api/v1/attempts/nothing/outcome", `{"result":"failure"}`, 404, bearer...)

	check("this document", stranger, "GET", "/api/openapi.json", "", 200)

	env.Flush(t)
	if body := check("stats", browser, "GET", "/api/v1/admin/stats?period=1h", "", 200); !strings.Contains(body, `"name":"shop"`) {
		t.Errorf("stats name no application: %s", body)
	}
}

// TestOpenAPIEventKinds: the event search's kind parameter lists the
// kinds the search takes (dashboard.SearchKinds), in its order.
func TestOpenAPIEventKinds(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name   string `json:"name"`
				Schema struct {
					Enum []string `json:"enum"`
				} `json:"schema"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPIFile(t), &doc); err != nil {
		t.Fatal(err)
	}
	var enum []string
	for _, p := range doc.Paths["/api/v1/admin/events"]["get"].Parameters {
		if p.Name == "kind" {
			enum = p.Schema.Enum
		}
	}
	if got, want := strings.Join(enum, " "), strings.Join(dashboard.SearchKinds, " "); got != want {
		t.Errorf("GET /api/v1/admin/events: kind is one of\n%s\nwant\n%s", got, want)
	}
}

// TestOpenAPIDescribesLimitedAnswers: the account's routes, over
// XCLOAK_LIMIT_ACCOUNT_IP, and the passkeys' options, over their
// network's limit, answer 429, which the document describes.
func TestOpenAPIDescribesLimitedAnswers(t *testing.T) {
	v := openAPIValidator(t)
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.Limits.SetCount(auth.RuleAccountIP, 1)
		c.Limits.SetCount(auth.RulePasskeyOptionsIP, 1)
	}})
	base := env.Start(t)
	env.AddUser(t, "ann@example.test", "ann-password-1", false)
	browser := xcloaktest.Client(t, "127.0.0.1")
	send := func(method, path, body string) (*http.Request, *http.Response) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, b := do(t, browser, req)
		req.Body = io.NopCloser(strings.NewReader(body))
		resp.Body = io.NopCloser(strings.NewReader(b))
		return req, resp
	}
	if _, resp := send("POST", "/api/v1/login", `{"email":"ann@example.test","password":"ann-password-1"}`); resp.StatusCode != 200 {
		t.Fatalf("sign-in: %d", resp.StatusCode)
	}
	send("GET", "/api/v1/account/sessions", "")
	send("POST", "/api/v1/login/passkey/options", "")
	token := strings.Repeat("a", 43)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/account/sessions", ""},
		{"DELETE", "/api/v1/account/sessions/" + strings.Repeat("0", 32), ""},
		{"GET", "/api/v1/account/activity", ""},
		{"POST", "/api/v1/login/passkey/options", ""},
		{"POST", "/api/v1/login/mfa/webauthn/options", `{"mfa_token":"` + token + `"}`},
	} {
		req, resp := send(c.method, c.path, c.body)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s %s over its limit: %d; want 429", c.method, c.path, resp.StatusCode)
			continue
		}
		if ok, errs := v.ValidateHttpRequestResponse(req, resp); !ok {
			for _, e := range errs {
				t.Errorf("%s %s (429): %s: %s", c.method, c.path, e.Message, e.Reason)
			}
		}
	}
}
