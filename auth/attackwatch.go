package auth

import (
	"context"
	"time"
)

// AttackWatch hears the outcome of every sign-in attempt and says whether
// the deployment is under attack ("attack mode"). The service asks Active
// on every sign-in, so it must be cheap (no round trip per call), and
// Observe must not block: a watch that keeps its counts elsewhere batches
// them.
type AttackWatch interface {
	Observe(SignInAttempt)
	Active() bool
}

// attackRunner is a watch with background work (counting in a shared
// store, say): Service.Run runs it until its context ends.
type attackRunner interface {
	Run(ctx context.Context)
}

// SignInAttempt is one sign-in attempt as the attack watch sees it.
type SignInAttempt struct {
	At time.Time
	// Account is the normalised email tried, "" for a malformed request.
	Account string
	Client  Client
	Outcome Outcome
}

// Outcome is what became of a sign-in attempt.
type Outcome uint8

// The outcomes of a sign-in attempt.
const (
	OutcomeSucceeded Outcome = iota + 1
	// OutcomeFailed: a wrong password for an account that exists.
	OutcomeFailed
	// OutcomeUnknownAccount: no account has the email tried.
	OutcomeUnknownAccount
	// OutcomeRejected: refused by a limit or a lockout before any
	// password checking.
	OutcomeRejected
	// OutcomeHeld: the right password from a browser that must first
	// confirm by email (new-device verification), or of a breached
	// password, held alike with the wrong ones; an application's
	// challenged success. Counted as a failure by the attack detector, as
	// the held wrong ones are: otherwise whether attack mode trips would
	// tell which was right.
	OutcomeHeld
	// OutcomeInvalid: a malformed request.
	OutcomeInvalid
	// OutcomeUnavailable: not decided, a store or the hashing pool being
	// unavailable.
	OutcomeUnavailable
	// OutcomeStep: the right password of an account with a second factor,
	// answered with its second step, which says so already.
	OutcomeStep
)

// noAttackWatch is the watch of a service given none: never under attack.
type noAttackWatch struct{}

func (noAttackWatch) Observe(SignInAttempt) {}
func (noAttackWatch) Active() bool          { return false }

// The security events of attack mode (package attack records them).
const (
	// EventAttackStarted: attack mode was switched on; Detail "trigger" is
	// "automatic" or "admin", "by" the administrator who did, and, when
	// the detector did, "signal" and the window's figures.
	EventAttackStarted = "attack_started"
	// EventAttackEnded: attack mode was switched off, after its quiet
	// period or by an administrator ("by"); Detail "since" is when it
	// started.
	EventAttackEnded = "attack_ended"
	// EventAttackSwitched: an administrator's switch that neither started
	// nor ended attack mode but changed what it does: "mode" "on" made
	// the detector's attack mode the administrator's, which stays until
	// switched off; "off" while it was off keeps the detector from
	// switching it on for the quiet period. "by" is the administrator.
	EventAttackSwitched = "attack_switched"
)
