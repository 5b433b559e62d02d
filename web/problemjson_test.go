package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// problemBodyBefore is how failJSON wrote a body with encoding/json.
func problemBodyBefore(p problem) []byte {
	body := map[string]any{"error": p.code}
	if p.retryAfter > 0 {
		body["retry_after_seconds"] = p.retryAfter
	}
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(body)
	return b.Bytes()
}

// TestProblemJSON checks that the bodies failJSON writes by hand are,
// byte for byte, what encoding/json wrote, for every answer's code and
// for retry-afters from a second to years.
func TestProblemJSON(t *testing.T) {
	errs := []error{
		errBadRequest, errCrossOrigin, errInternal, errNoMatch, errTooManyStreams, errTooManyExports, errTooManySearches, errStreamsFull, errSignedOut,
		errUnknownOrigin, errHostNotProtected, errNotAdmin, errBadAttackMode, errBadCursor, errBadActivityPage,
		errPasswordChangeRequired, auth.ErrInvalidAPIKey, auth.ErrUnknownAttempt, auth.ErrVerificationRequired,
		auth.ErrInvalidCode, auth.ErrInvalidPasskey, auth.ErrPasskeyExists, auth.ErrNoFactor, auth.ErrFactorRequired,
		auth.ErrInvalidCredentials, auth.ErrInvalidToken, auth.ErrWeakPassword, auth.ErrSamePassword,
		auth.ErrBreachedPassword, auth.ErrNoUser, auth.ErrLastAdmin, auth.ErrUserDisabled, auth.ErrNotListed,
		auth.ErrNoSession, auth.ErrInvalidRequest, auth.ErrInvalidEmail, auth.ErrUnavailable, auth.ErrHasherBusy,
		errors.New("something else"),
	}
	for _, d := range []time.Duration{time.Nanosecond, time.Second, 59*time.Second + 1, 10 * time.Minute, 9000 * time.Hour} {
		errs = append(errs, &auth.LimitedError{RetryAfter: d}, &auth.DeniedError{RetryAfter: d}, &auth.DeniedError{Locked: true, RetryAfter: d})
	}
	for _, err := range errs {
		p := problemFor(err)
		if got, want := problemJSON(p), problemBodyBefore(p); !bytes.Equal(got, want) {
			t.Errorf("%v: got %s, want %s", err, got, want)
		}
	}
	// A code JSON would escape, HTML's <, > and & included, is written as
	// encoding/json writes it, its retry-after kept.
	for _, code := range []string{"a<b\"c", "a<b", "a>b", "a&b", "a\u2028b", "a\\b", "a\x01b", "ä"} {
		for _, retry := range []int{0, 7} {
			p := problem{code: code, retryAfter: retry}
			if got, want := problemJSON(p), problemBodyBefore(p); !bytes.Equal(got, want) {
				t.Errorf("code %q, retry %d: got %s, want %s", code, retry, got, want)
			}
		}
	}
}

// The 429 of the JSON sign-in, headers and body, as a client reads it.
func TestFailJSONRejection(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/api/v1/login", nil)
	s.failJSON(w, r, &auth.LimitedError{RetryAfter: 537*time.Second + time.Millisecond})
	if w.Code != 429 {
		t.Errorf("status %d, want 429", w.Code)
	}
	if got := w.Header().Get("Retry-After"); got != "538" {
		t.Errorf("Retry-After %q, want 538 (rounded up, never early)", got)
	}
	if got := w.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q, want application/json", got)
	}
	if got, want := w.Body.String(), `{"error":"too_many_attempts","retry_after_seconds":538}`+"\n"; got != want {
		t.Errorf("body %s, want %s", got, want)
	}
}
