package auth

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Breached passwords. A password that is in a breach corpus is known to
// whoever holds the corpus, and credential stuffing and spraying try
// those first. So, NIST SP 800-63B's rule, no account is given one: a new
// password that is breached is refused (ErrBreachedPassword) by every way
// of setting one. And a right password that is breached signs no browser
// in as it would: a known device gets a session that can only change the
// password (Session.MustChangePassword), an unknown browser is held for
// verification by mail.
//
// Looking a password up (package breached) is bounded in time and may
// fail: the corpus unreachable, slow or throttling, or read but no range
// (an empty one, an HTML page answered with 200). A failure is logged,
// without the password or anything of its hash, and counted in
// xcloak_breached_lookup_failures_total. What it means then depends on
// what the lookup was for:
//   - Setting a password, it is taken as not breached. Refusing a new
//     password because the corpus could not be read would lock users
//     out of resets over an outage of something only advisory.
//   - A sign-in from a known device is taken as not breached too: that
//     browser has signed in with the password before.
//   - A sign-in from any other browser is held, right password or wrong,
//     as new-device verification holds it, and the owner of a right one
//     is mailed a sign-in link (or asked for a new password, should the
//     mail's own lookup find it breached). Taken as not breached, the
//     right one would sign in and the wrong one be refused whenever the
//     lookup failed: a stuffing run that made a range API throttle, by
//     its own volume, would learn again which of its breached pairs were
//     right. Held, the lookup's failure changes nothing it can see.

// ErrBreachedPassword: a new password that is in a breach corpus.
var ErrBreachedPassword = errors.New("auth: password appears in a data breach")

// BreachedChecker tells whether a password is in a breach corpus (package
// breached implements it); an error means it could not tell in time.
type BreachedChecker interface {
	Breached(ctx context.Context, password string) (bool, error)
}

// breachedCheck is the service's breached-password lookup and its
// failures' metric.
type breachedCheck struct {
	checker  BreachedChecker // nil: no checking
	failures prometheus.Counter
}

func newBreachedCheck(c BreachedChecker, reg prometheus.Registerer) (breachedCheck, error) {
	failures := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xcloak_breached_lookup_failures_total",
		Help: "Breached-password lookups that failed or timed out; a sign-in from a new browser was held, anything else taken as not breached."})
	if err := reg.Register(failures); err != nil {
		return breachedCheck{}, err
	}
	return breachedCheck{checker: c, failures: failures}, nil
}

// passwordBreached reports whether password is in the breach corpus: the
// lookup, bounded in time by the checker, and false when checking is off
// or the lookup failed (logged and counted). The password XCloak stores
// and compares is its NFKC form (normalisePassword), so that form is
// looked up, and the password as typed too when it differs (both at
// once): a full-width "Ｐassword1" is the breached "Password1" here.
func (s *Service) passwordBreached(ctx context.Context, password string) bool {
	breached, _ := s.lookUpPassword(ctx, password)
	return breached
}

// signedInBreached is passwordBreached for the right password of a
// known device's sign-in, which restricts its session when breached
// (Session.MustChangePassword). It looks up whether or not the client
// waits, as the session is made (signedIn): a lookup cut short by the
// client's hang-up would be a failed one, taken as not breached, and a
// client that closes only its side of the connection ends its request's
// context yet still reads the answer, a session free of the restriction.
// The checker bounds the lookup, and afterDecision the wait for it.
func (s *Service) signedInBreached(ctx context.Context, password string) bool {
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	return s.passwordBreached(ctx, password)
}

// lookUpPassword is passwordBreached that also tells whether the answer
// is unknown: a lookup failed and none found the password.
func (s *Service) lookUpPassword(ctx context.Context, password string) (breached, unknown bool) {
	if s.breached.checker == nil {
		return false, false
	}
	normal := normalisePassword(password)
	if normal == password {
		found, failed := s.lookUpBreached(ctx, normal)
		return found, !found && failed
	}
	// Both forms at once: each lookup may take the checker's whole
	// timeout, and one after the other would hold the request for two.
	typed := make(chan [2]bool, 1)
	go func() {
		found, failed := s.lookUpBreached(ctx, password)
		typed <- [2]bool{found, failed}
	}()
	found, failed := s.lookUpBreached(ctx, normal)
	other := <-typed
	found, failed = found || other[0], failed || other[1]
	return found, !found && failed
}

// lookUpBreached is one lookup of lookUpPassword.
func (s *Service) lookUpBreached(ctx context.Context, password string) (found, failed bool) {
	found, err := s.breached.checker.Breached(ctx, password)
	if err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil {
		// Cut short because the caller gave up (a client that hung
		// up): no news about the corpus, so neither counted, which
		// XCloakBreachedLookupsFailing fires on, nor logged as a
		// failure, as dbDown counts no Postgres error for one. Still
		// no answer: a new browser's sign-in is held on it.
		return false, true
	}
	if err != nil {
		s.breached.failures.Inc()
		s.log.WarnContext(ctx, "breached-password lookup failed", "err", err)
		return false, true
	}
	return found, false
}

// checkNotBreached refuses a new password that is in the breach corpus
// with ErrBreachedPassword; a failed lookup accepts it.
func (s *Service) checkNotBreached(ctx context.Context, password string) error {
	if s.passwordBreached(ctx, password) {
		return ErrBreachedPassword
	}
	return nil
}
