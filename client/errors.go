package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Errors of the decision API.
var (
	// ErrInvalidAPIKey: XCloak refused the key (401): it is missing,
	// unknown or revoked. Retrying with the same key cannot help.
	ErrInvalidAPIKey = errors.New("xcloak client: invalid API key")
	// ErrUnknownAttempt: the attempt id given to [Client.Outcome] is not
	// one XCloak can take an outcome for (404): unknown, expired, issued to
	// another application, or already used.
	ErrUnknownAttempt = errors.New("xcloak client: unknown attempt")
	// ErrUnavailable: no answer came from XCloak (the network failed, the
	// call's time ran out), or it answered 5xx but 500 and 501 (503 while
	// its stores are unreachable, a gateway's 502 while it is down). It is the one error
	// after which an application may choose to let an attempt through
	// unprotected; the errors it wraps tell which. A call whose context
	// its caller canceled is not unavailable: it is refused like any
	// other error.
	ErrUnavailable = errors.New("xcloak client: XCloak is unavailable")
)

// RequestError is XCloak's refusal of a malformed request (400), or the
// client's own refusal of one it would not send: Field names the JSON field
// at fault ("client_ip", "account") when one is, and Message says what is
// wrong with it.
type RequestError struct {
	Field   string
	Message string
}

func (e *RequestError) Error() string {
	if e.Field == "" {
		return "xcloak client: bad request: " + e.Message
	}
	return "xcloak client: bad request: " + e.Field + ": " + e.Message
}

// StatusError is an answer that is not one the API documents for the call:
// a server error (5xx, such as 503 while XCloak's stores are unreachable),
// an unexpected status (a 404 from a base URL that is not XCloak's, a
// redirect), or a body that is not the JSON the call answers with.
type StatusError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the body's "error" field, when the body had one.
	Code string
	// RetryAfter is the answer's Retry-After, zero when it had none.
	RetryAfter time.Duration
	// Detail says what was wrong with the body, when that was the trouble.
	Detail string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("xcloak client: unexpected answer %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is makes a 5xx answer ErrUnavailable, XCloak or what stands in front
// of it saying it cannot decide now (XCloak's 503, a gateway's 502 or
// 504, a CDN's 52x), but for 500 and 501: those are a server's own fault,
// which some request might provoke, and an application that let such an
// attempt through would open the door to whoever found it.
func (e *StatusError) Is(target error) bool {
	return target == ErrUnavailable && e.StatusCode >= 502 && e.StatusCode <= 599
}

// unanswered is err, the failure of a call that got no answer, as
// ErrUnavailable, unless the caller canceled the call: that is no silence
// of XCloak's. The caller's context is often its user's request's, which
// net/http cancels when the user half-closes the connection while the
// answer can still reach him; taken for ErrUnavailable, that would let
// him through a fail-open application without any limit. A deadline,
// the caller's or the Client's, is the time running out, and
// ErrUnavailable.
func unanswered(caller context.Context, err error) error {
	if errors.Is(caller.Err(), context.Canceled) {
		return err
	}
	return &noAnswer{err}
}

// noAnswer is a call that got no answer, as ErrUnavailable; its message
// is the transport's or the context's error, which it wraps too.
type noAnswer struct{ err error }

func (e *noAnswer) Error() string   { return e.err.Error() }
func (e *noAnswer) Unwrap() []error { return []error{e.err, ErrUnavailable} }

// errorBody is every JSON answer's shape; each call reads the fields it
// expects.
type errorBody struct {
	Error   string `json:"error"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// isJSON reports whether the answer says its body is JSON.
func (a answer) isJSON() bool {
	mt, _, err := mime.ParseMediaType(a.header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// decode reads the answer's JSON body into v, or says why it cannot.
func (a answer) decode(v any) error {
	if !a.isJSON() {
		return a.statusError("the body is not JSON (Content-Type " + strconv.Quote(a.header.Get("Content-Type")) + ")")
	}
	if err := json.Unmarshal(a.body, v); err != nil {
		return a.statusError("the body is not the JSON expected: " + err.Error())
	}
	return nil
}

// statusError is the answer as a *StatusError, with the body's error code
// when it has one.
func (a answer) statusError(detail string) *StatusError {
	e := &StatusError{StatusCode: a.status, RetryAfter: a.retryAfter(), Detail: a.shown(detail)}
	var body errorBody
	if a.isJSON() && json.Unmarshal(a.body, &body) == nil {
		e.Code = a.shown(body.Error)
	}
	return e
}

// shown is s, text of the answer that an error repeats, or a note in its
// place when it holds the key, or what looks like one: a server that
// echoes the request's Authorization header (a gateway's error page, an
// echo service behind a wrong base URL) would otherwise have the key
// written wherever the application logs its errors.
func (a answer) shown(s string) string {
	key := ""
	if a.auth != nil {
		key = strings.TrimPrefix(a.auth(), "Bearer ")
	}
	if strings.Contains(s, apiKeyPrefix) || key != "" && strings.Contains(s, key) {
		return "(left out: it may hold the API key)"
	}
	return s
}

// retryAfter reads the Retry-After header's seconds (XCloak never sends
// a date).
func (a answer) retryAfter() time.Duration {
	// Atoi gives the largest int for digits past its range.
	n, err := strconv.Atoi(a.header.Get("Retry-After"))
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0
	}
	return seconds(n)
}

// maxRetryAfterSeconds bounds a wait read from an answer: some 68 years,
// longer than any lock XCloak sets, where more seconds than time.Duration
// holds would come out as a wait of zero or less, a retry at once. It
// fits an int of 32 bits, and leaves a caller room to round it up.
const maxRetryAfterSeconds = math.MaxInt32

// seconds is n seconds, none when n is negative.
func seconds(n int) time.Duration {
	return time.Duration(min(max(n, 0), maxRetryAfterSeconds)) * time.Second
}

// refusal maps the answers both calls share to their errors: XCloak's
// 400, 401, and anything else as a *StatusError. A 404 is ErrUnknownAttempt only
// when XCloak says so; from anything else it means the base URL is wrong.
func (a answer) refusal() error {
	var body errorBody
	if a.isJSON() {
		_ = json.Unmarshal(a.body, &body)
	}
	switch {
	case a.status == http.StatusBadRequest && body.Error == "invalid_request":
		// XCloak's own refusal; another 400 (a gateway's, in JSON or not)
		// says nothing of the request's fields.
		msg := body.Message
		if msg == "" {
			msg = body.Error
		}
		return &RequestError{Field: a.shown(body.Field), Message: a.shown(msg)}
	case a.status == http.StatusUnauthorized:
		return ErrInvalidAPIKey
	case a.status == http.StatusNotFound && body.Error == "unknown_attempt":
		return ErrUnknownAttempt
	}
	return a.statusError("")
}
