package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/ratelimit"
	"github.com/xcloak/xcloak/templates"
)

func loginJSON(email, password string) string {
	b, _ := json.Marshal(map[string]string{"email": email, "password": password})
	return string(b)
}

func TestLoginJSONAndForm(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)

	c := xcloaktest.Client(t, "127.0.0.2")
	resp, body := post(t, c, base+"/api/v1/login", jsonType, loginJSON("ANN@example.com ", "correct horse"))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != `{"status":"ok"}` {
		t.Fatalf("JSON sign-in: %d %s", resp.StatusCode, body)
	}
	if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusOK {
		t.Fatalf("/account after sign-in: %d", resp.StatusCode)
	}
	if resp, _ := post(t, c, base+"/logout", formType, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	if resp, _ := get(t, c, base+"/account"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("/account after logout: %d %s, want redirect to /login", resp.StatusCode, resp.Header.Get("Location"))
	}

	form := url.Values{"email": {"ann@example.com"}, "password": {"correct horse"}}.Encode()
	resp, _ = post(t, c, base+"/login", formType, form)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account" {
		t.Fatalf("form sign-in: %d -> %s, want 303 to /account", resp.StatusCode, resp.Header.Get("Location"))
	}
	form = url.Values{"email": {"ann@example.com"}, "password": {"wrong"}}.Encode()
	resp, body = post(t, c, base+"/login", formType, form)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "Email or password is incorrect.") {
		t.Fatalf("form failure: %d, want 401 with the generic message", resp.StatusCode)
	}
}

// TestSecureCookies checks the session and device cookies' attributes as a
// production deployment sets them.
func TestSecureCookies(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Web: func(c *webConfig) { c.InsecureCookies = false }})
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	resp, _ := post(t, xcloaktest.Client(t, "127.0.0.2"), base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "correct horse"))
	cookies := resp.Cookies()
	if len(cookies) != 2 {
		t.Fatalf("got cookies %v, want session and device", cookies)
	}
	for _, c := range cookies {
		if !strings.HasPrefix(c.Name, "__Host-xcloak_") || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Domain != "" {
			t.Errorf("cookie %s: secure=%v httponly=%v samesite=%v path=%q domain=%q", c.Name, c.Secure, c.HttpOnly, c.SameSite, c.Path, c.Domain)
		}
	}
}

// TestNoEnumeration: an unknown account and a wrong password get the same
// status, body and cookies, from both front ends.
func TestNoEnumeration(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, "real@example.com", "the real password", false)
	type answer struct {
		status  int
		body    string
		cookies int
		retry   string
	}
	// The form pages re-fill the address typed; that echo aside, the two
	// answers must be byte for byte the same.
	ask := func(path, ctype, body, email string) answer {
		resp, b := post(t, xcloaktest.Client(t, "127.0.0.3"), base+path, ctype, body)
		return answer{resp.StatusCode, strings.ReplaceAll(b, email, "EMAIL"), len(resp.Cookies()), resp.Header.Get("Retry-After")}
	}
	for _, front := range []struct {
		path, ctype string
		body        func(email string) string
	}{
		{"/api/v1/login", jsonType, func(e string) string { return loginJSON(e, "wrong password") }},
		{"/login", formType, func(e string) string { return url.Values{"email": {e}, "password": {"wrong password"}}.Encode() }},
		{"/api/v1/password-reset", jsonType, func(e string) string { return `{"email":"` + e + `"}` }},
		{"/password-reset", formType, func(e string) string { return url.Values{"email": {e}}.Encode() }},
	} {
		known := ask(front.path, front.ctype, front.body("real@example.com"), "real@example.com")
		unknown := ask(front.path, front.ctype, front.body("ghost@example.com"), "ghost@example.com")
		if known != unknown {
			t.Errorf("%s: real account answered %+v, unknown %+v", front.path, known, unknown)
		}
		if known.cookies != 0 {
			t.Errorf("%s: a failed attempt set %d cookies", front.path, known.cookies)
		}
	}
}

// TestAccountLimitOverHTTP: 500 concurrent wrong passwords for one account
// from 50 loopback addresses; exactly the limit get past the limiter (401),
// the rest 429 with Retry-After.
func TestAccountLimitOverHTTP(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Lockout.Threshold = 1000 }})
	base := env.Start(t)
	env.AddUser(t, "victim@example.com", "the real password", false)
	counts := burstHTTP(t, base, 500, func(i int) (source, email string) {
		return fmt.Sprintf("127.0.1.%d", 1+i%50), "victim@example.com"
	})
	want := env.Auth.Limits[auth.RuleLoginAccount].Count
	if counts[http.StatusUnauthorized] != want || counts[http.StatusTooManyRequests] != 500-want {
		t.Fatalf("answers %v; want exactly %d x 401 and %d x 429", counts, want, 500-want)
	}
}

// TestIPLimitOverHTTP: 500 concurrent attempts from one address across 500
// accounts; exactly the per-address limit get past the limiter.
func TestIPLimitOverHTTP(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	counts := burstHTTP(t, base, 500, func(i int) (source, email string) {
		return "127.0.2.1", fmt.Sprintf("user%d@example.com", i)
	})
	want := env.Auth.Limits[auth.RuleLoginIP].Count
	if counts[http.StatusUnauthorized] != want || counts[http.StatusTooManyRequests] != 500-want {
		t.Fatalf("answers %v; want exactly %d x 401 and %d x 429", counts, want, 500-want)
	}
}

// burstHTTP fires n JSON sign-ins at once, each from the source address and
// for the email pick returns, and counts the answers by status. Each
// account's guess is its own, so that no burst over many accounts sprays
// one password. Every 429
// must carry a Retry-After of at least one second.
func burstHTTP(t *testing.T, base string, n int, pick func(i int) (source, email string)) map[int]int {
	t.Helper()
	clients := map[string]*http.Client{}
	reqs := make([]*http.Request, n)
	cs := make([]*http.Client, n)
	for i := range n {
		source, email := pick(i)
		if clients[source] == nil {
			clients[source] = xcloaktest.Client(t, source)
		}
		cs[i] = clients[source]
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/api/v1/login", strings.NewReader(loginJSON(email, "a wrong guess for "+email)))
		req.Header.Set("Content-Type", jsonType)
		reqs[i] = req
	}
	var (
		mu     sync.Mutex
		counts = map[int]int{}
		wg     sync.WaitGroup
		start  = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			resp, err := cs[i].Do(reqs[i])
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
					t.Errorf("429 with Retry-After %q", resp.Header.Get("Retry-After"))
				}
			}
			mu.Lock()
			counts[resp.StatusCode]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return counts
}

// TestSpoofedForwardedForChangesNothing: with no trusted proxies, a client
// that invents X-Forwarded-For and Forwarded headers is still limited by its
// own address.
func TestSpoofedForwardedForChangesNothing(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginIP, 5) }})
	base := env.Start(t)
	c := xcloaktest.Client(t, "127.0.3.1")
	statuses := []int{}
	for i := range 8 {
		resp, _ := post(t, c, base+"/api/v1/login", jsonType, loginJSON(fmt.Sprintf("u%d@example.com", i), "guess"),
			"X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i), "Forwarded", fmt.Sprintf("for=203.0.113.%d", i), "X-Real-IP", "192.0.2.99")
		statuses = append(statuses, resp.StatusCode)
	}
	want := []int{401, 401, 401, 401, 401, 429, 429, 429}
	if fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v: spoofed headers must not give new addresses", statuses, want)
	}
}

// TestTrustedProxyForwardedFor: behind a configured proxy, the forwarded
// address is the client.
func TestTrustedProxyForwardedFor(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{
		Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginIP, 2) },
		Web:  func(c *webConfig) { c.TrustedProxies = mustPrefixes(t, "127.0.4.1/32") },
	})
	base := env.Start(t)
	proxy := xcloaktest.Client(t, "127.0.4.1")
	for i := range 6 {
		resp, _ := post(t, proxy, base+"/api/v1/login", jsonType, loginJSON(fmt.Sprintf("u%d@example.com", i), "guess"),
			"X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i/2))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("request %d through the trusted proxy: %d, want 401 (two per forwarded client)", i, resp.StatusCode)
		}
	}
}

// TestRetryAfterIsNeverEarlyOverHTTP: a client that waits exactly the
// Retry-After it was given (header, JSON field and page text agree) is let
// through: whole seconds are rounded up, never down.
func TestRetryAfterIsNeverEarlyOverHTTP(t *testing.T) {
	limit := ratelimit.Limit{Count: 1, Window: 1500 * time.Millisecond}
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits[auth.RuleLoginAccount] = limit }})
	base := env.Start(t)
	fronts := []struct {
		name string
		send func(c *http.Client, email string) (*http.Response, string)
		says func(body string, seconds int) bool
	}{
		{"json", func(c *http.Client, email string) (*http.Response, string) {
			return post(t, c, base+"/api/v1/login", jsonType, loginJSON(email, "wrong password"))
		}, func(body string, seconds int) bool {
			return strings.Contains(body, fmt.Sprintf(`"retry_after_seconds":%d`, seconds))
		}},
		{"form", func(c *http.Client, email string) (*http.Response, string) {
			return post(t, c, base+"/login", formType, url.Values{"email": {email}, "password": {"wrong password"}}.Encode())
		}, func(body string, seconds int) bool {
			return strings.Contains(body, templates.RetryText(seconds))
		}},
	}
	for i, front := range fronts {
		c := xcloaktest.Client(t, fmt.Sprintf("127.0.3.%d", i+1))
		// The second attempt must come within the window of the first: where
		// a loaded machine took longer, the first may have left it, and the
		// round goes again with another account.
		for round := 0; ; round++ {
			if round == 5 {
				t.Fatalf("%s: 5 rounds in a row took longer than the window of %v", front.name, limit.Window)
			}
			email := fmt.Sprintf("%s%d@example.com", front.name, round)
			began := time.Now()
			if resp, _ := front.send(c, email); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s: first attempt %d, want 401", front.name, resp.StatusCode)
			}
			resp, body := front.send(c, email)
			if resp.StatusCode == http.StatusUnauthorized && time.Since(began) >= limit.Window {
				continue
			}
			seconds, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			if resp.StatusCode != http.StatusTooManyRequests || err != nil || seconds < 1 {
				t.Fatalf("%s: second attempt %d with Retry-After %q, want 429 with whole seconds", front.name, resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			if !front.says(body, seconds) {
				t.Fatalf("%s: the body does not say %d seconds: %s", front.name, seconds, body)
			}
			time.Sleep(time.Duration(seconds) * time.Second)
			if resp, _ := front.send(c, email); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s: after waiting the Retry-After of %ds: %d, want 401 (let through)", front.name, seconds, resp.StatusCode)
			}
			break
		}
	}
}
