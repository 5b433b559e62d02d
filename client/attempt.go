package client

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"time"
	"unicode/utf8"
)

// AttemptKind is what an attempt is for.
type AttemptKind string

// The kinds of attempt XCloak decides on.
const (
	// Login is a sign-in with a password: the limits, lockouts and
	// new-device checks of XCloak's own sign-in.
	Login AttemptKind = "login"
	// Reset is a request for a password-reset mail: the limits of XCloak's
	// own reset requests. Its outcome is Success once the user has chosen
	// a new password through the mail's link and it is stored, never when
	// the mail is sent: it ends the account's lockout and forgets its known
	// devices. Its id works for a day; keep it on the server with the
	// link's token.
	Reset AttemptKind = "reset"
)

// AttemptRequest is one attempt to decide on.
type AttemptRequest struct {
	// Kind is Login or Reset.
	Kind AttemptKind
	// Account is the account (an email or a user name) as the
	// application's lookup resolves it, the same way every time. XCloak
	// folds case and compatible forms, so "Ann@Example.com" and
	// "ann@example.com" share their limits; it keeps each application's
	// accounts apart from the others'. Known devices are kept for the
	// account as sent, not folded.
	Account string
	// ClientIP is the address of the user's browser: the connection's peer,
	// or, behind the application's own reverse proxy, the address that
	// proxy reports. Never take it from a header the user could have set.
	ClientIP netip.Addr
	// Device, optional, is an opaque id of the user's browser that the
	// application keeps in a long-lived cookie of its own. A device that
	// signed in to the account before is limited on its own and never
	// challenged, so an attacker cannot lock its owner out.
	Device string
}

// DecisionKind is XCloak's answer to an attempt.
type DecisionKind string

// XCloak's answers.
const (
	// Allow: go ahead, check the password, and report the outcome.
	Allow DecisionKind = "allow"
	// Challenge: go ahead, but XCloak would itself ask this browser to
	// verify (it is new to the account while new-device verification
	// applies): whatever the password, verify the user another way (a mail
	// link, a second factor) before granting a session, and report the
	// password's outcome.
	Challenge DecisionKind = "challenge"
	// Deny: refuse the attempt without checking the password; retry after
	// Decision.RetryAfter. There is no outcome to report.
	Deny DecisionKind = "deny"
)

// Reasons for a Deny.
const (
	ReasonRateLimited = "rate_limited" // a limit on the account, device or network is full
	ReasonLocked      = "locked"       // the account (or device) is locked out after failures
)

// Decision is XCloak's answer to an attempt.
type Decision struct {
	// Kind is Allow, Challenge or Deny.
	Kind DecisionKind
	// AttemptID names the attempt for Outcome; empty for Deny. It is
	// single use and expires (see the decision API's guide).
	AttemptID string
	// Reason is why a Deny: ReasonRateLimited or ReasonLocked. Tell the
	// user neither: one answer for both keeps lockouts from being probed.
	Reason string
	// RetryAfter is how long a Deny lasts; send it as Retry-After.
	RetryAfter time.Duration
}

// Result is what the password check of an allowed or challenged attempt
// found.
type Result string

// The results an application reports.
const (
	Success Result = "success"
	Failure Result = "failure"
)

// ResultOf is Success when ok, Failure otherwise.
func ResultOf(ok bool) Result {
	if ok {
		return Success
	}
	return Failure
}

// attemptBody is POST /api/v1/attempts' request.
type attemptBody struct {
	Kind     AttemptKind `json:"kind"`
	Account  string      `json:"account"`
	ClientIP string      `json:"client_ip"`
	Device   string      `json:"device,omitempty"`
}

// decisionBody is its answer, 200 or 429.
type decisionBody struct {
	Decision          DecisionKind `json:"decision"`
	AttemptID         string       `json:"attempt_id"`
	Reason            string       `json:"reason"`
	RetryAfterSeconds int          `json:"retry_after_seconds"`
}

// Attempt asks XCloak whether an attempt may go ahead. A Deny is a
// Decision, not an error; an error means XCloak gave no decision. When it
// is [ErrUnavailable] (XCloak or the network failed, or the time ran out),
// what to do (refuse the sign-in, or let it through unprotected) is the
// application's policy. Any other error must refuse the attempt: a
// [*RequestError] (the request was malformed, perhaps on purpose: an
// account with a control character, or too long, is the user's to send),
// [ErrInvalidAPIKey], or a [*StatusError] that is not ErrUnavailable
// (no 5xx, or a 500 or 501, a server's own fault). Letting those
// through would let anyone who can make XCloak refuse a request pass its
// limits.
//
// Attempt never retries: XCloak counts an attempt against the limits when
// it decides, so a retry after an answer lost on the way back would count
// the user twice, could deny them, and would leave the first attempt's id
// unknown. The caller's context and the Client's timeout bound the call.
func (c *Client) Attempt(ctx context.Context, req AttemptRequest) (Decision, error) {
	if err := req.check(); err != nil {
		return Decision{}, err
	}
	a, err := c.post(ctx, "/api/v1/attempts", attemptBody{
		Kind:     req.Kind,
		Account:  req.Account,
		ClientIP: req.ClientIP.Unmap().WithZone("").String(),
		Device:   req.Device,
	})
	if err != nil {
		return Decision{}, err
	}
	if a.status != http.StatusOK && a.status != http.StatusTooManyRequests {
		return Decision{}, a.refusal()
	}
	var body decisionBody
	if err := a.decode(&body); err != nil {
		return Decision{}, err
	}
	d := Decision{Kind: body.Decision, AttemptID: body.AttemptID, Reason: a.shown(body.Reason)}
	switch {
	case a.status == http.StatusOK && (d.Kind == Allow || d.Kind == Challenge) && d.AttemptID != "":
		return d, nil
	case a.status == http.StatusTooManyRequests && d.Kind == Deny:
		d.AttemptID = ""
		d.RetryAfter = max(seconds(body.RetryAfterSeconds), a.retryAfter())
		return d, nil
	case a.status == http.StatusTooManyRequests:
		// A 429 that is no decision: failed key checks from this network
		// are limited, for one.
		return Decision{}, a.statusError("")
	}
	return Decision{}, a.statusError("no decision in the answer")
}

// check refuses, without a round trip, what XCloak would refuse. An
// account or a device that is not UTF-8 could not even reach XCloak to be
// refused: encoding/json would send each invalid byte as U+FFFD, and
// XCloak would count another account than the one the application looks
// up.
func (r AttemptRequest) check() error {
	switch {
	case r.Kind != Login && r.Kind != Reset:
		return &RequestError{Field: "kind", Message: `want "login" or "reset"`}
	case r.Account == "":
		return &RequestError{Field: "account", Message: "empty"}
	case !utf8.ValidString(r.Account):
		return &RequestError{Field: "account", Message: "not UTF-8"}
	case !utf8.ValidString(r.Device):
		return &RequestError{Field: "device", Message: "not UTF-8"}
	case !r.ClientIP.IsValid():
		return &RequestError{Field: "client_ip", Message: "no address"}
	}
	return nil
}

// outcomeBody is POST /api/v1/attempts/{attempt_id}/outcome's request.
type outcomeBody struct {
	Result Result `json:"result"`
}

// Outcome tells XCloak what the password check of an allowed or challenged
// attempt found: failures feed lockouts and attack detection, and a
// success makes the attempt's device known to the account, exactly as
// XCloak's own sign-ins do; a challenged attempt's success, like a right
// password XCloak holds itself, makes no device known and counts towards
// the account's lockout. Each attempt id takes one outcome; a second,
// an expired or a foreign one is ErrUnknownAttempt. Report it as soon as
// the password is checked: until then the attempt holds a place towards
// the lockout of its account or device (for a minute at most), and an
// account a few failures short of its lock lets no more attempts go
// ahead than the places left.
//
// Like Attempt, Outcome never retries: its first call may have landed.
func (c *Client) Outcome(ctx context.Context, attemptID string, result Result) error {
	if result != Success && result != Failure {
		return &RequestError{Field: "result", Message: `want "success" or "failure"`}
	}
	if attemptID == "" {
		return &RequestError{Field: "attempt_id", Message: "empty"}
	}
	a, err := c.post(ctx, "/api/v1/attempts/"+url.PathEscape(attemptID)+"/outcome", outcomeBody{Result: result})
	if err != nil {
		return err
	}
	if a.status == http.StatusNoContent {
		return nil
	}
	return a.refusal()
}
