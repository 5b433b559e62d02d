package webhook

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// Event is the JSON body of one delivery.
type Event struct {
	// ID is unique per event and the same in every attempt to deliver
	// it, so that a receiver can drop a retry it already took.
	ID string `json:"id"`
	// Type is one of the Type constants.
	Type string `json:"type"`
	// Time is when the event happened, RFC 3339 in UTC.
	Time string `json:"time"`
	// Data is what else is known of it: "account", "user_id", "source",
	// "rule" when set, and the event's own detail ("until", "by",
	// "level", ...). Never a secret: it is what the audit stream writes.
	Data map[string]string `json:"data"`
}

// The types of the events sent. They are a contract with receivers: a
// name never changes meaning.
const (
	// TypeLockoutStarted: failed sign-ins locked an account; data
	// "until" says until when, "level" how many lockouts in a row. With
	// data "device" "known", only the owner's known browser is locked,
	// and no lockout.ended follows.
	TypeLockoutStarted = "lockout.started"
	// TypeLockoutEnded: a lockout's time ran out; data "until" is when.
	// A lockout someone ends early is an account.unlocked instead, so
	// every lockout.started is followed by exactly one of the two (unless
	// the lockout was not recorded, Postgres being down, or its end was
	// found more than an hour late: auth's lockoutEndHorizon).
	TypeLockoutEnded = "lockout.ended"
	// TypeAccountUnlocked: a lockout was ended early; data "by" is who:
	// "admin:<email>", "cli" or "reset" (a password reset). The unlock
	// link mailed to the owner is none: it lets their browser in as a
	// known device and leaves the account locked. Data "step" ("own",
	// "held" or "passkey") says an administrator ended one lock of the
	// account's second step alone, and left its password's lockout as
	// it was.
	TypeAccountUnlocked = "account.unlocked"
	// TypeAttackStarted and TypeAttackEnded: attack mode was switched on
	// or off; data "trigger" is "automatic" or "admin", "by" the
	// administrator, "since" (on ended) when it started.
	TypeAttackStarted = "attack.started"
	TypeAttackEnded   = "attack.ended"
	// TypeAttackSwitched: an administrator (data "by") switched attack
	// mode without starting or ending it: data "mode" "on" made the
	// detector's attack mode theirs, which stays until switched off;
	// "off" while it was off keeps the detector from switching it on for
	// the quiet period.
	TypeAttackSwitched = "attack.switched"
	// TypeSignInHeld: the right password from a browser that is no known
	// device, held until the owner follows the link mailed to them.
	TypeSignInHeld = "signin.held"
	// TypeUserDisabled and TypeUserDeleted: an administrator (data "by")
	// disabled or deleted an account.
	TypeUserDisabled = "user.disabled"
	TypeUserDeleted  = "user.deleted"
	// TypeUserEnabled: an administrator (data "by") enabled a disabled
	// account again; it signs in with the password it had.
	TypeUserEnabled = "user.enabled"
	// TypeUserPromoted and TypeUserDemoted: an administrator (data "by")
	// made an account an administrator, or a member again.
	TypeUserPromoted = "user.promoted"
	TypeUserDemoted  = "user.demoted"
	// TypePasswordSet: an account was given a new password by data "by",
	// not its owner; its sessions ended and its known devices were
	// forgotten. Development mode's demo administrator is given one at
	// each start ("by" "dev").
	TypePasswordSet = "password.set"
	// TypeFactorRemoved: data "by", an administrator ("admin:<email>")
	// or the command line ("cli"), removed an account's second factors,
	// data "count" of them, with its recovery codes. An owner removing a
	// factor of their own is not sent.
	TypeFactorRemoved = "factor.removed"
	// TypeUserCreated: an account was made with a password, by data "by"
	// ("cli" for "xcloak user add"); data "role" is "admin" or "member".
	TypeUserCreated = "user.created"
	// TypeAPIKeyCreated and TypeAPIKeyRevoked: a key of the decision API
	// was made or revoked, by data "by"; data "app" is its application,
	// "key" its name where that is another, "key_id" its id, never the
	// key. They name no account.
	TypeAPIKeyCreated = "apikey.created"
	TypeAPIKeyRevoked = "apikey.revoked"
)

// types maps the kinds of security events sent to their types. Every
// administrator's act that changes who can sign in or administer, or what
// attack mode does, is among them: the copy a receiver keeps off the
// machine is the trace that survives someone who mints an administrator
// from a shell and then deletes the rows (docs/SECURITY-MODEL.md). None of
// them floods (see floods): they go in the queue a flood of lockouts
// never fills.
var types = map[string]string{
	auth.EventLockout:              TypeLockoutStarted,
	auth.EventLockoutEnded:         TypeLockoutEnded,
	auth.EventUnlock:               TypeAccountUnlocked,
	auth.EventAttackStarted:        TypeAttackStarted,
	auth.EventAttackEnded:          TypeAttackEnded,
	auth.EventAttackSwitched:       TypeAttackSwitched,
	auth.EventVerificationRequired: TypeSignInHeld,
	auth.EventUserDisabled:         TypeUserDisabled,
	auth.EventUserEnabled:          TypeUserEnabled,
	auth.EventUserDeleted:          TypeUserDeleted,
	auth.EventUserCreated:          TypeUserCreated,
	auth.EventUserPromoted:         TypeUserPromoted,
	auth.EventUserDemoted:          TypeUserDemoted,
	auth.EventPasswordSet:          TypePasswordSet,
	auth.EventFactorRemoved:        TypeFactorRemoved, // but the owner's: see ownersOwn
	auth.EventAPIKeyCreated:        TypeAPIKeyCreated,
	auth.EventAPIKeyRevoked:        TypeAPIKeyRevoked,
}

// ownersOwn reports whether e is the owner's act on their own account, of
// a kind an administrator can record too: a factor removed by its owner,
// who is mailed of it, and which no receiver needs. An administrator's
// removal names them in "by"; anyone there but the owner is sent, so that
// a "by" written later that this package does not know errs on the side
// of telling.
func ownersOwn(e auth.Event) bool {
	if e.Kind != auth.EventFactorRemoved {
		return false
	}
	by := e.Detail["by"]
	return by == "" || by == "owner"
}

// Types lists every type sent, for documentation and tests.
func Types() []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range types {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// FromAuth returns the Event for security event e, with a new ID, and
// whether e is of interest at all.
func FromAuth(e auth.Event) (Event, bool) {
	typ, ok := types[e.Kind]
	if !ok || ownersOwn(e) {
		return Event{}, false
	}
	data := make(map[string]string, len(e.Detail)+4)
	for k, v := range e.Detail {
		data[k] = v
	}
	if e.Account != "" {
		data["account"] = e.Account
	}
	if e.UserID != 0 {
		data["user_id"] = strconv.FormatInt(e.UserID, 10)
	}
	if e.Source != "" {
		data["source"] = e.Source
	}
	if e.Rule != "" {
		data["rule"] = e.Rule
	}
	return Event{ID: newID(), Type: typ, Time: e.At.UTC().Format(time.RFC3339Nano), Data: data}, true
}

// newID is 128 random bits in hex: unique without coordination between
// replicas.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
