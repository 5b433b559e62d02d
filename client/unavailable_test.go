package client_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/xcloak/xcloak/client"
)

// TestOnlyNoAnswerIsUnavailable: ErrUnavailable, the one error an
// application may let an attempt through on, is XCloak's silence or its
// 5xx, never an answer that refuses the request: an attacker who can make
// XCloak refuse his (an account with a control character, or too long)
// must not pass a fail-open application's limits with it.
func TestOnlyNoAnswerIsUnavailable(t *testing.T) {
	const js = "application/json"
	noAnswer := func(t *testing.T) *client.Client {
		// Nothing listens on port 1 of 127.0.0.1.
		c, err := client.New("http://127.0.0.1:1", testKey)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	timedOut := func(t *testing.T) *client.Client {
		c, err := client.New(stalled(t), testKey, client.WithTimeout(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	answering := func(status int, contentType, body string) func(t *testing.T) *client.Client {
		return func(t *testing.T) *client.Client { c, _ := canned(t, status, contentType, body); return c }
	}
	tests := []struct {
		name        string
		client      func(t *testing.T) *client.Client
		req         client.AttemptRequest
		unavailable bool
	}{
		{"no one listens", noAnswer, someone, true},
		{"the time is up", timedOut, someone, true},
		{"503, its stores down", answering(503, js, `{"error":"unavailable"}`), someone, true},
		{"a gateway's 502", answering(502, "text/html", "<html>Bad Gateway</html>"), someone, true},
		{"a gateway's 504", answering(504, "text/html", "<html>Gateway Timeout</html>"), someone, true},
		{"a CDN's 522", answering(522, "text/html", "<html>Connection timed out</html>"), someone, true},
		// A 500 is a server's own fault, which some input might provoke:
		// taken for unavailability, that input would open the door.
		{"a 500", answering(500, "text/plain", "Internal Server Error"), someone, false},
		{"a 501", answering(501, "text/plain", "Not Implemented"), someone, false},
		{"XCloak refuses the request", answering(400, js, `{"error":"invalid_request","field":"account","message":"must be UTF-8 without control characters"}`), someone, false},
		{"the client refuses the request", noAnswer, client.AttemptRequest{Kind: client.Login, ClientIP: netip.MustParseAddr("192.0.2.7")}, false},
		{"the key is refused", answering(401, js, `{"error":"invalid_api_key"}`), someone, false},
		{"key checks are limited", answering(429, js, `{"error":"too_many_attempts","retry_after_seconds":60}`), someone, false},
		{"not XCloak's 404", answering(404, "text/plain", "404 page not found"), someone, false},
		{"a 200 that is no decision", answering(200, "text/html", "<html>welcome</html>"), someone, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.client(t).Attempt(t.Context(), tt.req)
			if err == nil {
				t.Fatal("Attempt gave no error")
			}
			if got := errors.Is(err, client.ErrUnavailable); got != tt.unavailable {
				t.Errorf("errors.Is(%v, ErrUnavailable) = %v, want %v", err, got, tt.unavailable)
			}
		})
	}
}

// TestTheCallersCancellationIsNoUnavailability: a call the caller gave up
// is no silence of XCloak's. The caller's context is often its user's
// request's, which net/http cancels when the user half-closes the
// connection, while the answer can still reach him: as ErrUnavailable, a
// fail-open application would check his password with no limit at all.
func TestTheCallersCancellationIsNoUnavailability(t *testing.T) {
	c, err := client.New(stalled(t), testKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = c.Attempt(ctx, someone)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Attempt = %v, want context.Canceled", err)
	}
	if errors.Is(err, client.ErrUnavailable) {
		t.Errorf("errors.Is(%v, ErrUnavailable) = true, want false: the caller gave up", err)
	}
	if err := c.Outcome(ctx, "some-id", client.Failure); errors.Is(err, client.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("Outcome with a canceled context = %v, want context.Canceled and not ErrUnavailable", err)
	}
}
