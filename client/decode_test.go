package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/client"
	"github.com/xcloak/xcloak/internal/testenv"
)

// These tests are about the client's reading and writing of HTTP: each
// server here answers one canned response, so that every shape of answer
// XCloak (or something in front of it) can give is decoded. The real
// server's answers are in client_test.go.

const testKey = "xck_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"

// canned serves status, header and body to every request and counts them.
func canned(t *testing.T, status int, contentType, body string, header ...string) (*client.Client, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return c, &calls
}

var someone = client.AttemptRequest{Kind: client.Login, Account: "ann@example.com", ClientIP: netip.MustParseAddr("192.0.2.7")}

func TestAttemptDecodesDecisions(t *testing.T) {
	const js = "application/json"
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		header      []string
		want        client.Decision
	}{
		{"allow", 200, js, `{"decision":"allow","attempt_id":"a1.sig"}`, nil,
			client.Decision{Kind: client.Allow, AttemptID: "a1.sig"}},
		{"challenge", 200, "application/json; charset=utf-8", `{"decision":"challenge","attempt_id":"a2.sig"}`, nil,
			client.Decision{Kind: client.Challenge, AttemptID: "a2.sig"}},
		{"fields the client does not know yet are ignored", 200, js, `{"decision":"allow","attempt_id":"a3","later":true}`, nil,
			client.Decision{Kind: client.Allow, AttemptID: "a3"}},
		{"deny, locked", 429, js, `{"decision":"deny","reason":"locked","retry_after_seconds":900}`, []string{"Retry-After", "900"},
			client.Decision{Kind: client.Deny, Reason: client.ReasonLocked, RetryAfter: 900 * time.Second}},
		{"deny, rate limited, the header only", 429, js, `{"decision":"deny","reason":"rate_limited"}`, []string{"Retry-After", "42"},
			client.Decision{Kind: client.Deny, Reason: client.ReasonRateLimited, RetryAfter: 42 * time.Second}},
		{"deny, the body only", 429, js, `{"decision":"deny","reason":"rate_limited","retry_after_seconds":7}`, nil,
			client.Decision{Kind: client.Deny, Reason: client.ReasonRateLimited, RetryAfter: 7 * time.Second}},
		// Seconds past time.Duration's range made a wait of zero or less
		// (a retry at once), or of some part of the one given.
		{"deny, a wait too long for a Duration in the body", 429, js, `{"decision":"deny","reason":"locked","retry_after_seconds":9223372037}`, nil,
			client.Decision{Kind: client.Deny, Reason: client.ReasonLocked, RetryAfter: math.MaxInt32 * time.Second}},
		{"deny, a wait too long for a Duration in the header", 429, js, `{"decision":"deny","reason":"locked"}`, []string{"Retry-After", "99999999999999999999"},
			client.Decision{Kind: client.Deny, Reason: client.ReasonLocked, RetryAfter: math.MaxInt32 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := canned(t, tt.status, tt.contentType, tt.body, tt.header...)
			got, err := c.Attempt(t.Context(), someone)
			if err != nil {
				t.Fatalf("Attempt: %v", err)
			}
			if got != tt.want {
				t.Errorf("Attempt = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAttemptDecodesRefusals(t *testing.T) {
	const js = "application/json"
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		header      []string
		// check judges the error.
		check func(error) bool
	}{
		{"400 names the field", 400, js, `{"error":"invalid_request","field":"client_ip","message":"not an IP address"}`, nil,
			func(err error) bool {
				var re *client.RequestError
				return errors.As(err, &re) && re.Field == "client_ip" && re.Message == "not an IP address"
			}},
		{"401", 401, js, `{"error":"invalid_api_key"}`, []string{"WWW-Authenticate", "Bearer"},
			func(err error) bool { return errors.Is(err, client.ErrInvalidAPIKey) }},
		{"401 from something else is still the key", 401, "text/plain", "Unauthorized", nil,
			func(err error) bool { return errors.Is(err, client.ErrInvalidAPIKey) }},
		{"503 with its code and Retry-After", 503, js, `{"error":"unavailable"}`, []string{"Retry-After", "1"},
			func(err error) bool {
				var se *client.StatusError
				return errors.As(err, &se) && se.StatusCode == 503 && se.Code == "unavailable" && se.RetryAfter == time.Second
			}},
		{"502 page of a proxy", 502, "text/html", "<html>Bad Gateway</html>", nil,
			func(err error) bool {
				var se *client.StatusError
				return errors.As(err, &se) && se.StatusCode == 502 && se.Code == ""
			}},
		{"429 that is no decision: key checks limited", 429, js, `{"error":"too_many_attempts","retry_after_seconds":60}`, []string{"Retry-After", "60"},
			func(err error) bool {
				var se *client.StatusError
				return errors.As(err, &se) && se.StatusCode == 429 && se.Code == "too_many_attempts" && se.RetryAfter == time.Minute
			}},
		{"200 that is not JSON", 200, "text/html", "<html>welcome</html>", nil,
			func(err error) bool {
				var se *client.StatusError
				return errors.As(err, &se) && se.StatusCode == 200 && strings.Contains(se.Detail, "not JSON")
			}},
		{"200 JSON that does not parse", 200, js, `{"decision":`, nil,
			func(err error) bool { var se *client.StatusError; return errors.As(err, &se) && se.Detail != "" }},
		{"200 without an attempt id", 200, js, `{"decision":"allow"}`, nil,
			func(err error) bool { var se *client.StatusError; return errors.As(err, &se) }},
		{"200 deny is no decision", 200, js, `{"decision":"deny","reason":"locked"}`, nil,
			func(err error) bool { var se *client.StatusError; return errors.As(err, &se) }},
		{"404 of a base URL that is not XCloak", 404, "text/plain", "404 page not found", nil,
			func(err error) bool {
				var se *client.StatusError
				return errors.As(err, &se) && se.StatusCode == 404 && !errors.Is(err, client.ErrUnknownAttempt)
			}},
		{"a redirect is not followed", 302, "", "", []string{"Location", "https://elsewhere.example/"},
			func(err error) bool { var se *client.StatusError; return errors.As(err, &se) && se.StatusCode == 302 }},
		{"an answer too long to be XCloak's", 200, js, `{"decision":"allow","attempt_id":"` + strings.Repeat("a", 70<<10) + `"}`, nil,
			func(err error) bool {
				var se *client.StatusError
				return errors.As(err, &se) && strings.Contains(se.Detail, "longer than")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, calls := canned(t, tt.status, tt.contentType, tt.body, tt.header...)
			got, err := c.Attempt(t.Context(), someone)
			if err == nil || !tt.check(err) {
				t.Fatalf("Attempt = %+v, %v (%T); not the error wanted", got, err, err)
			}
			if got != (client.Decision{}) {
				t.Errorf("Attempt's decision with an error = %+v, want none", got)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("server saw %d requests, want 1: the client never retries", n)
			}
		})
	}
}

func TestOutcomeDecodes(t *testing.T) {
	const js = "application/json"
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		check       func(error) bool
	}{
		{"204", 204, "", "", func(err error) bool { return err == nil }},
		{"404 unknown attempt", 404, js, `{"error":"unknown_attempt"}`,
			func(err error) bool { return errors.Is(err, client.ErrUnknownAttempt) }},
		{"404 of something else", 404, "text/plain", "404 page not found",
			func(err error) bool {
				var se *client.StatusError
				return errors.As(err, &se) && !errors.Is(err, client.ErrUnknownAttempt)
			}},
		{"401", 401, js, `{"error":"invalid_api_key"}`, func(err error) bool { return errors.Is(err, client.ErrInvalidAPIKey) }},
		{"400", 400, js, `{"error":"invalid_request","field":"result","message":"want success or failure"}`,
			func(err error) bool { var re *client.RequestError; return errors.As(err, &re) && re.Field == "result" }},
		// A 400 that is not XCloak's refusal (a gateway's own, in JSON)
		// says nothing of the request's fields.
		{"400 of something else", 400, js, `{"message":"request header too large"}`,
			func(err error) bool {
				var se *client.StatusError
				var re *client.RequestError
				return errors.As(err, &se) && se.StatusCode == 400 && !errors.As(err, &re)
			}},
		{"200 is not an outcome's answer", 200, js, `{}`,
			func(err error) bool { var se *client.StatusError; return errors.As(err, &se) && se.StatusCode == 200 }},
		{"500", 500, js, `{"error":"internal_error"}`,
			func(err error) bool {
				var se *client.StatusError
				return errors.As(err, &se) && se.StatusCode == 500 && se.Code == "internal_error"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, calls := canned(t, tt.status, tt.contentType, tt.body)
			err := c.Outcome(t.Context(), "a1.sig", client.Failure)
			if !tt.check(err) {
				t.Fatalf("Outcome = %v (%T); not the answer wanted", err, err)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
		})
	}
}

// seen is one request as a recording server saw it.
type seen struct {
	method, uri, auth, contentType string
	body                           map[string]any
}

// recording answers like XCloak's happy path and records every request.
func recording(t *testing.T, prefix string) (*client.Client, <-chan seen) {
	t.Helper()
	reqs := make(chan seen, 10)
	c := fakeXCloak(t, prefix, `{"decision":"allow","attempt_id":"id"}`, func(r *http.Request) {
		s := seen{method: r.Method, uri: r.RequestURI, auth: r.Header.Get("Authorization"), contentType: r.Header.Get("Content-Type")}
		if err := json.NewDecoder(r.Body).Decode(&s.body); err != nil {
			t.Errorf("request body: %v", err)
		}
		reqs <- s
	})
	return c, reqs
}

// fakeXCloak is a client of a server that answers like XCloak: 204 to an
// outcome, and attempt, a decision's JSON, to an attempt; each request
// goes to see first, unless it is nil. prefix is the base URL's path.
func fakeXCloak(t *testing.T, prefix, attempt string, see func(*http.Request)) *client.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if see != nil {
			see(r)
		}
		if strings.HasSuffix(r.URL.Path, "/outcome") {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, attempt)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL+prefix, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRequestsAreTheDocumentedOnes(t *testing.T) {
	c, reqs := recording(t, "/xcloak/")
	_, err := c.Attempt(t.Context(), client.AttemptRequest{Kind: client.Reset, Account: "Ann", ClientIP: netip.MustParseAddr("::ffff:192.0.2.1")})
	if err != nil {
		t.Fatal(err)
	}
	got := <-reqs
	want := seen{method: "POST", uri: "/xcloak/api/v1/attempts", auth: "Bearer " + testKey, contentType: "application/json",
		// An IPv4-mapped address is sent as the IPv4 client it is; an
		// empty device is left out.
		body: map[string]any{"kind": "reset", "account": "Ann", "client_ip": "192.0.2.1"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Attempt sent %+v\nwant %+v", got, want)
	}

	_, err = c.Attempt(t.Context(), client.AttemptRequest{Kind: client.Login, Account: "ann", ClientIP: netip.MustParseAddr("fe80::1%eth0"), Device: "d1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := (<-reqs).body; fmt.Sprint(got) != fmt.Sprint(map[string]any{"kind": "login", "account": "ann", "client_ip": "fe80::1", "device": "d1"}) {
		t.Errorf("Attempt with a device and a zone sent %v", got)
	}

	// An attempt id is one path segment, whatever it holds.
	if err := c.Outcome(t.Context(), "a/../b?c", client.Success); err != nil {
		t.Fatal(err)
	}
	got = <-reqs
	if got.uri != "/xcloak/api/v1/attempts/a%2F..%2Fb%3Fc/outcome" || fmt.Sprint(got.body) != "map[result:success]" {
		t.Errorf("Outcome sent %s %v", got.uri, got.body)
	}
}

func TestBadRequestsAreRefusedWithoutARoundTrip(t *testing.T) {
	c, calls := canned(t, 200, "application/json", `{"decision":"allow","attempt_id":"x"}`)
	tests := []struct {
		req   client.AttemptRequest
		field string
	}{
		{client.AttemptRequest{Kind: "signup", Account: "a", ClientIP: someone.ClientIP}, "kind"},
		{client.AttemptRequest{Kind: client.Login, ClientIP: someone.ClientIP}, "account"},
		{client.AttemptRequest{Kind: client.Login, Account: "a"}, "client_ip"},
	}
	for _, tt := range tests {
		_, err := c.Attempt(t.Context(), tt.req)
		var re *client.RequestError
		if !errors.As(err, &re) || re.Field != tt.field {
			t.Errorf("Attempt(%+v) = %v, want a RequestError on %s", tt.req, err, tt.field)
		}
	}
	for _, bad := range []struct {
		id     string
		result client.Result
	}{{"", client.Success}, {"x", "maybe"}} {
		var re *client.RequestError
		if err := c.Outcome(t.Context(), bad.id, bad.result); !errors.As(err, &re) {
			t.Errorf("Outcome(%q, %q) = %v, want a RequestError", bad.id, bad.result, err)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("server saw %d requests, want none", n)
	}
}

// stalled never answers until the request is given up or the test ends.
func stalled(t *testing.T) string {
	t.Helper()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server notices a client's leaving only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	return srv.URL
}

func TestCallsAreBounded(t *testing.T) {
	url := stalled(t)
	t.Run("by the Client's timeout", func(t *testing.T) {
		c, err := client.New(url, testKey, client.WithTimeout(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Attempt(t.Context(), someone); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Attempt = %v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("after an upgrade, then silence", func(t *testing.T) {
		srv := httptest.NewServer(testenv.SilentUpgrade(t))
		t.Cleanup(srv.Close)
		c, err := client.New(srv.URL, testKey, client.WithTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		if _, err := c.Attempt(t.Context(), someone); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Attempt = %v, want context.DeadlineExceeded", err)
		}
		if took := time.Since(began); took > 30*time.Second { // a hang never ends; a loaded machine is seconds late
			t.Errorf("Attempt took %v, with a timeout of 100ms", took)
		}
	})
	t.Run("by the caller's context", func(t *testing.T) {
		c, err := client.New(url, testKey, client.WithTimeout(0))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		go cancel()
		if err := c.Outcome(ctx, "id", client.Success); !errors.Is(err, context.Canceled) {
			t.Errorf("Outcome = %v, want context.Canceled", err)
		}
	})
}

func TestTheKeyIsNeverShown(t *testing.T) {
	// Nothing listens on port 1 of 127.0.0.1: the call fails in the
	// transport, with the URL in its error.
	c, err := client.New("http://127.0.0.1:1/", testKey)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Attempt(t.Context(), someone)
	if err == nil {
		t.Fatal("Attempt to a closed port succeeded")
	}
	for _, s := range []string{err.Error(), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), fmt.Sprintf("%+v", *c)} {
		if strings.Contains(s, testKey) || strings.Contains(s, testKey[4:20]) {
			t.Errorf("the key shows in %q", s)
		}
	}
}

// TestTheKeyIsNeverShownFromTheAnswer: a server that repeats the
// request's Authorization header in its answer (a gateway's error page,
// an echo service behind a wrong base URL) does not put the key in the
// errors the application logs, wherever the answer puts it.
func TestTheKeyIsNeverShownFromTheAnswer(t *testing.T) {
	const js = "application/json"
	for _, tt := range []struct{ name, contentType, body string }{
		{"a 400's message", js, `{"error":"invalid_request","field":"account","message":"%s"}`},
		{"a 400's field", js, `{"error":"invalid_request","field":"%s"}`},
		{"a 400's code", js, `{"error":"invalid_request %s"}`},
		{"an error code", js, `{"error":"%s"}`},
		{"the Content-Type", `text/plain; token="%s"`, `x`},
	} {
		for _, status := range []int{200, 400, 403, 404, 503} {
			t.Run(fmt.Sprint(tt.name, " ", status), func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					echo := r.Header.Get("Authorization")
					w.Header().Set("Content-Type", strings.ReplaceAll(tt.contentType, "%s", echo))
					w.WriteHeader(status)
					_, _ = io.WriteString(w, strings.ReplaceAll(tt.body, "%s", echo))
				}))
				t.Cleanup(srv.Close)
				c, err := client.New(srv.URL, testKey)
				if err != nil {
					t.Fatal(err)
				}
				_, attemptErr := c.Attempt(t.Context(), someone)
				for call, err := range map[string]error{"Attempt": attemptErr, "Outcome": c.Outcome(t.Context(), "a1.sig", client.Failure)} {
					if err == nil {
						t.Fatalf("%s succeeded", call)
					}
					if s := fmt.Sprintf("%v %+v", err, err); strings.Contains(s, testKey[4:20]) {
						t.Errorf("%s's error shows the key: %s", call, s)
					}
				}
			})
		}
	}
}

// TestADenyShowsNoKey: nor does a deny's reason, which an application
// logs as it logs the decision.
func TestADenyShowsNoKey(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = fmt.Fprintf(w, `{"decision":"deny","reason":%q,"retry_after_seconds":5}`, r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, testKey)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Attempt(t.Context(), someone)
	if err != nil || d.Kind != client.Deny {
		t.Fatalf("Attempt = %+v, %v; want a deny", d, err)
	}
	if strings.Contains(d.Reason, testKey[4:20]) {
		t.Errorf("the deny's reason shows the key: %q", d.Reason)
	}
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	for _, tt := range []struct{ base, key string }{
		{"login.example.com", testKey},
		{"ftp://login.example.com", testKey},
		{"https://user:pw@login.example.com", testKey},
		{"https://login.example.com/?x=1", testKey},
		{"https://login.example.com/?", testKey}, // an empty query, which would come before the API's path
		{"https://login.example.com/#", testKey},
		{"https://login.example.com", ""},
		{"https://login.example.com", "xck_abc\r\nX-Evil: 1"},
		// Control characters net/http refuses in a header on every call.
		{"https://login.example.com", "xck_abc\x00def"},
		{"https://login.example.com", "xck_abc\vdef"},
		{"https://login.example.com", "xck_abc\x7fdef"},
	} {
		if _, err := client.New(tt.base, tt.key); err == nil {
			t.Errorf("New(%q, %q) succeeded", tt.base, tt.key)
		} else if tt.key != "" && strings.Contains(err.Error(), tt.key) {
			t.Errorf("New's error %q shows the key", err)
		}
	}
}

// TestNewShowsNoCredentialsOfTheBaseURL: a base URL refused for holding a
// user and password (the key pasted there, say) is not quoted whole.
func TestNewShowsNoCredentialsOfTheBaseURL(t *testing.T) {
	for _, base := range []string{
		"https://shop:" + testKey + "@login.example.com",
		"https://" + testKey + "@login.example.com",
		"https://shop:" + testKey + "@login.example.com/%zz", // one url.Parse refuses
	} {
		_, err := client.New(base, testKey)
		if err == nil {
			t.Fatalf("New(%q) succeeded", base)
		}
		if strings.Contains(err.Error(), testKey[4:20]) {
			t.Errorf("New's error %q shows the credentials of the base URL", err)
		}
	}
}

// TestNewShowsNoKeyGivenAsTheBaseURL: a key given where the base URL goes
// (the two arguments swapped, or the key in a query, as other services
// take theirs) is refused, and its error, which is logged, does not quote
// it.
func TestNewShowsNoKeyGivenAsTheBaseURL(t *testing.T) {
	for _, tt := range []struct{ base, key string }{
		{testKey, "https://login.example.com"},
		{"https://login.example.com/?api_key=" + testKey, testKey},
		{"https://login.example.com/#" + testKey, testKey},
		{"https://login.example.com/%zz" + testKey, testKey}, // one url.Parse refuses
		{"login.example.com/" + testKey, testKey},
	} {
		_, err := client.New(tt.base, tt.key)
		if err == nil {
			t.Fatalf("New(%q, %q) succeeded", tt.base, tt.key)
		}
		if strings.Contains(err.Error(), testKey[4:20]) {
			t.Errorf("New's error %q shows the key", err)
		}
	}
}

// TestRedirectsAreNeverFollowedWithTheCallersHTTPClient: a redirect is
// never XCloak's answer, and following one would send the key (Go keeps
// Authorization for the same host on another port or scheme, and for its
// subdomains) and the attempt elsewhere. A caller's own http.Client, whose
// redirect policy is Go's default, follows none either.
func TestRedirectsAreNeverFollowedWithTheCallersHTTPClient(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		if r.Header.Get("Authorization") != "" {
			t.Errorf("the key reached %s %s", r.Method, r.URL)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"decision":"allow","attempt_id":"id"}`)
	}))
	t.Cleanup(other.Close)
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+r.URL.Path, status)
			}))
			t.Cleanup(srv.Close)
			hc := &http.Client{Transport: http.DefaultTransport}
			c, err := client.New(srv.URL, testKey, client.WithHTTPClient(hc))
			if err != nil {
				t.Fatal(err)
			}
			d, err := c.Attempt(t.Context(), someone)
			var se *client.StatusError
			if !errors.As(err, &se) || se.StatusCode != status {
				t.Errorf("Attempt = %+v, %v; want a StatusError %d", d, err, status)
			}
			if err := c.Outcome(t.Context(), "id", client.Failure); !errors.As(err, &se) || se.StatusCode != status {
				t.Errorf("Outcome = %v; want a StatusError %d", err, status)
			}
			if hc.CheckRedirect != nil {
				t.Error("New changed the caller's http.Client")
			}
		})
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirects' target saw %d requests, want none", n)
	}
}

// TestAnswerHeadersAreBounded: an answer is read within 64 KiB of
// headers, as its body is: one with a megabyte of them is no decision,
// rather than every call reading up to net/http's 10 MB default.
func TestAnswerHeadersAreBounded(t *testing.T) {
	c, _ := canned(t, 200, "application/json", `{"decision":"allow","attempt_id":"a1"}`, "X-Padding", strings.Repeat("p", 1<<20))
	if d, err := c.Attempt(t.Context(), someone); err == nil {
		t.Fatalf("Attempt = %+v with a megabyte of headers, want an error", d)
	}
}

// TestExampleTellsAChallengeNothingOfThePassword: the Example's sign-in
// answers a challenged attempt the same whether its password was right or
// wrong, or a credential-stuffing run learns which of its passwords are.
func TestExampleTellsAChallengeNothingOfThePassword(t *testing.T) {
	c := fakeXCloak(t, "", `{"decision":"challenge","attempt_id":"c1"}`, nil)
	right := signIn(t.Context(), c, "ann@example.com", "correct horse battery staple", someone.ClientIP)
	wrong := signIn(t.Context(), c, "ann@example.com", "a guess", someone.ClientIP)
	if right != wrong || strings.Contains(right, "password") {
		t.Errorf("a challenged sign-in answers %q to the right password and %q to a wrong one, want one answer naming neither", right, wrong)
	}
}

// TestBasePathKeptAsWritten: a base URL's path is kept as written, bar its
// trailing slashes however many: an escaped slash stays escaped (a proxy
// that routes by the raw path routes by it), and "//" adds no empty
// segment before the API's path.
func TestBasePathKeptAsWritten(t *testing.T) {
	for prefix, want := range map[string]string{
		"/xcloak//":      "/xcloak/api/v1/attempts",
		"/a%2Fb/":        "/a%2Fb/api/v1/attempts",
		"/":              "/api/v1/attempts",
		"//":             "/api/v1/attempts",
		"/tenant%20one/": "/tenant%20one/api/v1/attempts",
	} {
		c, reqs := recording(t, prefix)
		if _, err := c.Attempt(t.Context(), client.AttemptRequest{Kind: client.Login, Account: "ann", ClientIP: netip.MustParseAddr("192.0.2.1")}); err != nil {
			t.Fatalf("%s: %v", prefix, err)
		}
		if got := (<-reqs).uri; got != want {
			t.Errorf("base path %q: request to %s, want %s", prefix, got, want)
		}
	}
}

// TestInvalidUTF8IsRefusedNotReplaced: an account or a device that is not
// UTF-8 (a form's "ann%FF", read as it came) is refused without a round
// trip, as XCloak refuses a body that is not UTF-8. encoding/json would
// send each invalid byte as U+FFFD instead, and XCloak would count and
// lock an account the application never looks up: one of its own for
// each count of invalid bytes, whatever the application's lookup makes
// of them.
func TestInvalidUTF8IsRefusedNotReplaced(t *testing.T) {
	c, calls := canned(t, 200, "application/json", `{"decision":"allow","attempt_id":"x"}`)
	for _, tt := range []struct {
		req   client.AttemptRequest
		field string
	}{
		{client.AttemptRequest{Kind: client.Login, Account: "ann\xff", ClientIP: someone.ClientIP}, "account"},
		{client.AttemptRequest{Kind: client.Reset, Account: "\xc3ann", ClientIP: someone.ClientIP}, "account"},
		{client.AttemptRequest{Kind: client.Login, Account: "ann", ClientIP: someone.ClientIP, Device: "d\xfe"}, "device"},
	} {
		_, err := c.Attempt(t.Context(), tt.req)
		var re *client.RequestError
		if !errors.As(err, &re) || re.Field != tt.field {
			t.Errorf("Attempt(%+q) = %v, want a RequestError on %s", tt.req, err, tt.field)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("server saw %d requests, want none", n)
	}
}
