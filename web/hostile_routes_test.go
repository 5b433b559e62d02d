package web_test

import (
	"cmp"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/ratelimit"
	"github.com/xcloak/xcloak/web"
)

// TestEveryRouteRefusesHostileRequestsClearly sends every route of the
// service what a hostile client would: path values that are no ID or
// token, bodies that are no form or JSON, queries and headers of nonsense, as
// nobody, as a member, as an administrator and as an application with its
// key. Every answer is an answer
// or a refusal; none is a 5xx, which is where a panic or an error the
// handlers did not expect would show.
func TestEveryRouteRefusesHostileRequestsClearly(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
		// Every route is signed in to afresh, as each may end its
		// session: no limit may stand in the way of the next.
		for name := range c.Limits {
			c.Limits.SetCount(name, ratelimit.MaxCount)
		}
	}})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	env.AddUser(t, memberEmail, anyPassword, false)
	// An application holding a valid key: its requests reach past the
	// key's check, into the decision API's own.
	const application = "an application"
	apiKey := env.AddAPIKey(t, "hostile")

	values := []string{
		"", "x", "%00", "%ff", "..", "%2F", "-1", "0",
		"%22%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E",
		strings.Repeat("A", 43),                // a token's shape
		"00000000000000000000000000000000",     // a public ID's shape
		"00000000-0000-0000-0000-000000000000", // a UUID's
		strings.Repeat("9", 40),                // a number past int64
		strings.Repeat("a", 4000),              // long, under the header bound
	}
	type body struct{ ctype, text string }
	bodies := []body{
		{"", ""},
		{formType, "a=%zz&b"},
		{formType, "email=x&password=y&password_confirm=z&token=t&id=1&code=c&rd=%2F%2Fevil.example&name=%00&period=x"},
		{formType, "email=" + strings.Repeat("e", 70<<10)},
		{jsonType, "{"},
		{jsonType, `{"email":1,"password":[],"token":{},"outcome":null}`},
		{jsonType, `[]`},
		{jsonType, `{"email":"ann@example.com","password":"x","app":"` + strings.Repeat("p", 3000) + `","ip":"::ffff:0:0:0:0:1"}`},
		// The decision API's own bodies, of values an application would
		// not send.
		{jsonType, `{"kind":"login","account":"` + strings.Repeat("\u202e\u0301", 60) + `","client_ip":"::ffff:127.0.0.1","device":"` + strings.Repeat("\u0000", 3) + `"}`},
		{jsonType, `{"kind":"reset","account":"ann@example.com","client_ip":"0.0.0.0"}`},
		{jsonType, `{"kind":"login","account":" ","client_ip":"fe80::1%eth0","device":""}`},
		{jsonType, `{"result":"success"}`},
		{"multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"email\"\r\n\r\nx\r\n"},
		{"text/plain; charset=\xff", "x"},
	}
	queries := []string{
		"",
		"?period=%ff&page=-1&limit=99999999999999999999&cursor=%00&q=" + strings.Repeat("q", 3000),
		"?rd=%2F%2Fevil.example&rd=javascript:alert(1)&type=x&since=yesterday&before=" + strings.Repeat("9", 30),
		"?from=2026-13-45&to=-&account=%ff&source=1.2.3.4%2F99&rule=%00&event=x&format=y",
	}

	headers := []http.Header{
		{},
		{"Cookie": {"xcloak_session=%ff; xcloak_session=" + strings.Repeat("A", 43) + "; xcloak_device=%00"}},
		{"X-Forwarded-For": {"1.2.3.4, not an address, ::1"}, "X-Forwarded-Proto": {"gopher"}, "X-Forwarded-Host": {"evil.example"}},
		{"Origin": {"null"}, "Sec-Fetch-Site": {"same-origin"}, "Accept": {"text/event-stream;q=x, */*"}, "Accept-Language": {strings.Repeat("x-", 2000)}},
		{"Authorization": {"Bearer " + strings.Repeat("k", 3000)}, "User-Agent": {"\xff" + strings.Repeat("u", 3000)}},
	}

	signedIn := func(t *testing.T, email string) *http.Client {
		c := xcloaktest.Client(t, "127.0.8.1")
		if email != "" {
			signIn(t, c, base, email, anyPassword)
		}
		return c
	}

	for _, pattern := range web.RoutePatterns(env.Web) {
		method, route, _ := strings.Cut(pattern, " ")
		for _, who := range []string{"", memberEmail, adminEmail, application} {
			t.Run(pattern+" as "+cmp.Or(who, "nobody"), func(t *testing.T) {
				var c *http.Client
				if who == application {
					c = signedIn(t, "")
				} else {
					c = signedIn(t, who)
				}
				sent := 0
				send := func(path string, b body) {
					t.Helper()
					ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
					defer cancel()
					req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(b.text))
					if err != nil {
						t.Fatalf("%s %.80s: %v", method, path, err)
					}
					for k, v := range headers[sent%len(headers)] {
						req.Header[k] = v
					}
					sent++
					if who == application {
						req.Header.Set("Authorization", "Bearer "+apiKey)
					}
					if b.ctype != "" {
						req.Header.Set("Content-Type", b.ctype)
					}
					resp, err := c.Do(req)
					if err != nil {
						t.Fatalf("%s %.80s (%s %.40q): %.200v", method, path, b.ctype, b.text, err)
					}
					// The body is not read: the dashboard's stream
					// never ends.
					resp.Body.Close()
					if resp.StatusCode >= 500 {
						t.Errorf("%s %.80s (%s %.60q, headers %v): %d", method, path, b.ctype, b.text, req.Header, resp.StatusCode)
					}
				}
				paths := pathsOf(route, values)
				for i, p := range paths {
					b := body{}
					if method == http.MethodPost {
						b = bodies[i%len(bodies)]
					}
					send(p+queries[i%len(queries)], b)
				}
				last := paths[len(paths)-1]
				for _, q := range queries {
					send(last+q, body{})
				}
				if method == http.MethodPost {
					for _, b := range bodies {
						send(last, b)
					}
				}
			})
		}
	}
}

// pathsOf returns route with each of its {wildcards} replaced by each of
// values in turn; route itself when it has none.
func pathsOf(route string, values []string) []string {
	if !strings.Contains(route, "{") {
		return []string{route}
	}
	var out []string
	for _, v := range values {
		var b strings.Builder
		rest := route
		for {
			open := strings.IndexByte(rest, '{')
			if open < 0 {
				b.WriteString(rest)
				break
			}
			shut := strings.IndexByte(rest[open:], '}')
			b.WriteString(rest[:open])
			b.WriteString(v)
			rest = rest[open+shut+1:]
		}
		out = append(out, b.String())
	}
	return out
}
