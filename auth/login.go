package auth

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// Client is who sent a request, as far as limits are concerned.
type Client struct {
	// Addr is the client's address. Each network rule masks it to the
	// prefix it counts per (see KeyNetwork). The zero Addr puts the
	// request in one shared "unknown" bucket; it is never a reason to
	// skip a limit.
	Addr netip.Addr
	// UserAgent is the client's User-Agent header, described
	// (DescribeBrowser) for the account's list of sessions; never stored.
	UserAgent string
}

// sourceBits4 and sourceBits6 are the prefix lengths of a client's network as events and
// the dashboard name it.
const sourceBits4, sourceBits6 = 32, 64

// Source is the client's network as events and the dashboard name it:
// "192.0.2.1", "2001:db8::/64" or "unknown".
func (c Client) Source() string { return networkID(c.Addr, sourceBits4, sourceBits6) }

// LoginRequest is one sign-in attempt.
type LoginRequest struct {
	Email    string
	Password string
	Client   Client
	// DeviceCookie is the value of the cookie named DeviceCookieName(Email),
	// if the browser sent one.
	DeviceCookie string
	// OldSession is the session token the browser had, if any; a
	// successful sign-in ends it (the session is rotated).
	OldSession string
}

// LoginResult is what a successful sign-in gives the browser.
type LoginResult struct {
	Session Session
	// Device is the browser's device cookie for this account, new or
	// renewed.
	Device DeviceCookie
	// MFA is the second step to finish, with ErrMFARequired, when the
	// account has a second factor (mfa_signin.go); then there is no
	// session yet.
	MFA MFAStep
}

// Login decides a sign-in. In order: the request is validated; every limit
// and the account's lockout are checked, and the check's places towards
// the locks taken (admitCheck), in one Redis round trip, before any
// database work or hashing; then the password is verified
// (an unknown account costs the same one hash); a failure is counted
// towards the lockout of the device or the account, and the place given
// back; a success rotates the session and renews the device cookie, or
// adds the browser as a known device.
//
// A browser that is not a known device is held while new-device
// verification applies, and with a breached password always: the right
// password, a wrong one and an unknown account all get
// ErrVerificationRequired, and only the right one queues a mail with a
// link (verification.go).
//
// The right password of an account with a second factor gets no session
// but a second step (LoginResult.MFA, with ErrMFARequired), unless the
// browser is a known device its owner asked to remember. While new-device
// verification holds the browser, it is held like any other (nothing
// tells that the account has a factor), and the mailed link leads to the
// second step. Every held answer, ErrVerificationRequired, carries a
// second step of its own (LoginResult.MFA) that the factor's code may
// finish in place of the link, only for the right password
// (mfa_held.go).
//
// Errors: ErrInvalidRequest, *LimitedError (ErrLimited),
// ErrInvalidCredentials, ErrVerificationRequired, ErrMFARequired,
// ErrUnavailable, ErrHasherBusy.
func (s *Service) Login(ctx context.Context, req LoginRequest) (LoginResult, error) {
	// Normalised once, for the decision and the attack detector alike;
	// "" when it is no address.
	account, _ := NormaliseEmail(req.Email)
	// One reading of the clock for a rejection's event and its count by
	// the attack detector: a flood pays for each.
	at := s.now()
	res, outcome, err := s.login(ctx, req, account, at)
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrHasherBusy) {
		// Counted as an attempt like every other, so that the dashboard's
		// attempts are every sign-in request received.
		s.record(Event{Kind: EventLoginUnavailable, Source: req.Client.Source()})
		outcome = OutcomeUnavailable
	}
	if outcome != OutcomeRejected {
		// Counted when answered: a password check takes a while.
		at = s.now()
	}
	s.attack.Observe(SignInAttempt{At: at, Account: account, Client: req.Client, Outcome: outcome})
	if outcome == OutcomeRejected {
		// A flood of rejections gives way to the password checks in
		// flight, so that a returning user's hash gets a core
		// (giveway.go).
		s.hasher.GiveWay(ctx, rejectionGiveWay)
	}
	return res, err
}

// login decides a sign-in for Login; email is req.Email normalised, ""
// if it is not an address, and at when the sign-in came.
func (s *Service) login(ctx context.Context, req LoginRequest, email string, at time.Time) (LoginResult, Outcome, error) {
	source := req.Client.Source()
	if email == "" || req.Password == "" || len(req.Password) > MaxPasswordBytes {
		err := s.malformedLogin(ctx, req.Client)
		if errors.As(err, new(*LimitedError)) {
			return LoginResult{}, OutcomeRejected, err
		}
		return LoginResult{}, OutcomeInvalid, err
	}

	if req.DeviceCookie != "" {
		return s.loginWithCookie(ctx, req, email, source, at)
	}
	// The decision in a small frame of its own: a rejection, what a flood
	// is made of, never enters checkPassword's, which is large enough to
	// grow a connection's stack again after each garbage collection
	// shrank it.
	check, outcome, err := s.decideSignIn(ctx, req, email, source, "", at)
	if err != nil {
		return LoginResult{}, outcome, err
	}
	ctx, end := s.startCheck(ctx, check)
	defer end()
	// Past its limits: a password check in flight until answered.
	s.hasher.checkStarted()
	defer s.hasher.checkEnded()
	return s.checkPassword(ctx, req, email, source, "")
}

// loginWithCookie is login for a browser that sent a device cookie.
func (s *Service) loginWithCookie(ctx context.Context, req LoginRequest, email, source string, at time.Time) (LoginResult, Outcome, error) {
	// device is the nonce of a known device, "" for any other browser.
	device := ""
	// checking is set once this sign-in is a password check in flight,
	// which rejections give way to (giveway.go).
	checking := false
	// forgotten is set when the cookie cost a lookup that found no device.
	forgotten := false
	if nonce, ok := s.devices.Check(email, req.DeviceCookie); ok {
		// Its network's rules are asked of the limits' memory of
		// rejections (while Redis is away, of the limits in process)
		// before its device is looked up, as the decision
		// API asks them (decideLogin): a cookie keeps its MAC once its
		// device is forgotten, so a client that signs in to an account
		// of its own again and again holds as many as it likes, and
		// one past its network's limit that sent a fresh one each time
		// would cost a query each.
		if d, ok := s.limits.Remembered(s.rules(FlowSignIn, Subject{Client: req.Client, source: source})...); ok {
			return LoginResult{}, OutcomeRejected, s.rejectSignIn(d, email, source, at)
		}
		// Nor one the closed policy refuses whatever it carries: Redis
		// away, no sign-in is decided.
		if s.limits.Policy() == ratelimit.FailClosed && s.limits.Degraded() {
			return LoginResult{}, OutcomeUnavailable, unavailable("checking limits", ratelimit.ErrRedisUnavailable)
		}
		// A cookie this server signed for this account: a returning
		// user's browser. Its check is in flight from here, so that
		// the flood's rejections, and the other hashes, give way to
		// its device's lookup and its limits' decision too, not only
		// to its hash and its session's writes (giveway.go).
		checking = true
		s.hasher.checkStarted()
		defer s.hasher.checkEnded()
		returning := true
		s.hasher.returningStarted()
		defer func() {
			if returning {
				s.hasher.returningEnded()
			}
		}()
		// Without Postgres the browser is held by the account's rules:
		// a request they refuse still gets 429, and one they admit
		// cannot be decided anyway (503).
		known, looked, err := s.lookUpDevice(ctx, email, nonce)
		if err != nil {
			s.log.WarnContext(ctx, "device cookie not checked", "err", err)
		} else if known {
			device = nonce
		}
		forgotten = looked && err == nil && !known
		if device == "" {
			// Not a known device (forgotten, or not looked up): its
			// hash is another browser's, which gives way to the
			// returning ones. Its own mark ends here, so that it never
			// waits for itself: a sign-in slower for a cookie that
			// is valid would tell so (giveway.go).
			returning = false
			s.hasher.returningEnded()
		}
	}
	check, outcome, err := s.decideSignIn(ctx, req, email, source, device, at)
	if err != nil {
		var limited *LimitedError
		if forgotten && outcome == OutcomeRejected && !(errors.As(err, &limited) && limited.admitted) {
			s.countLookup(ctx, req.Client, source)
		}
		return LoginResult{}, outcome, err
	}
	ctx, end := s.startCheck(ctx, check)
	defer end()
	if !checking {
		// Past its limits: a password check in flight until answered.
		s.hasher.checkStarted()
		defer s.hasher.checkEnded()
	}
	return s.checkPassword(ctx, req, email, source, device)
}

// countLookup counts a lookup of a device that found none, for a sign-in
// its limits then refused, by the rules of the client's network: a
// refusal counts nothing in them, so that a client that sent a forgotten
// device's cookie each time (of which whoever signs in to an account of
// his own again and again holds as many as he likes) to that account once
// it is locked would cost a query each, however many. Counted, one past
// the network's rules is refused before its lookup (loginWithCookie,
// decideLogin). An admitted sign-in's lookup is counted by its decision,
// one refused after it (waiting for a place in vain) too.
func (s *Service) countLookup(ctx context.Context, c Client, source string) {
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	if _, err := s.decide(ctx, s.rules(FlowSignIn, Subject{Client: c, source: source})...); err != nil {
		s.log.WarnContext(ctx, "device lookup not counted", "err", err)
	}
}

// decideSignIn checks a sign-in's limits, from the known device device
// ("" for any other browser), and takes its password check's places
// towards the locks with them (admitCheck); it records a rejection, as of
// at. It returns the check once the sign-in is admitted.
func (s *Service) decideSignIn(ctx context.Context, req LoginRequest, email, source, device string, at time.Time) (*passwordCheck, Outcome, error) {
	// A known device is limited and locked on its own and is not held by
	// the account's limit or lockout (see RuleLoginDevice in the table). A
	// sprayed password is refused here, before any hashing (spraying.go).
	//
	// A flood's rejection is mostly known to the limits' memory of
	// rejections from the rules that need no password (its address', its
	// network's, its account's): those are asked first, so that it costs
	// no keyed hash of the password, which only the password's rule needs.
	// Its Retry-After is then the longest of those rules' remembered
	// times, as any answer from memory gives only the rules it consulted:
	// a sprayed password's lock, if longer, shows on a retry, which Redis
	// or the memory refuses again.
	sub := Subject{Client: req.Client, Account: email, Device: device, source: source}
	if d, remembered := s.limits.Remembered(s.rules(FlowSignIn, sub)...); remembered {
		return nil, OutcomeRejected, s.rejectSignIn(d, email, source, at)
	}
	sub.Password = s.sprayKeys.of(req.Password)
	return s.admitCheck(ctx, sub, req.Password, at)
}

// checkBound bounds a password check that holds places towards the locks
// (admitCheck): far longer than a check takes (the wait for a hashing
// slot, the hash, the stores' bounds).
const checkBound = 30 * time.Second

// checkInFlight is how long a password check holds its place towards a
// lock if it is never given back (its replica stopped): the check's bound
// and then the bound of counting its failure (afterDecision), with room
// to spare, so that no place runs out under a check or a count still
// under way; at least a minute, and short enough that places lost so do
// not hold an account for long.
func (s *Service) checkInFlight() time.Duration {
	redis := s.cfg.RedisTimeout
	if redis <= 0 {
		redis = ratelimit.DefaultTimeout
	}
	return max(time.Minute, checkBound+redis+afterDecisionSlack+10*time.Second)
}

// placePoll is how often a password check waiting for a place towards
// the lockout asks again: a fraction of a hash.
const placePoll = 20 * time.Millisecond

// admitCheck decides the sign-in rules of sub (its Password set), whose
// password is password, and holds two places for its password check: one
// towards the lockout of the known device, or else of the account, and
// one towards the spraying lock of the password (spraying.go), so that
// guesses sent at once are never checked past either lock: each holds its
// places until its failure, if any, is counted (ratelimit.Store's
// BeginAttempt). The places are taken by the decision itself
// (ratelimit.Rule.Place), one round trip in all; where the checks in
// flight hold them, the sign-in, admitted and counted by its limits,
// waits for them (waitForPlaces). A refused sign-in is recorded as of at.
//
// A password the account (or the device) already failed with, which its
// failure would not count again, takes no place: retyped, by its owner or
// by an attacker repeating a refused guess, it can neither be refused by
// the places nor keep anyone else out. So with the password's place: its
// lock counts each account once.
func (s *Service) admitCheck(ctx context.Context, sub Subject, password string, at time.Time) (*passwordCheck, Outcome, error) {
	email, source := sub.Account, sub.source
	if source == "" {
		source = sub.Client.Source()
	}
	rule, id := RuleLoginAccount, email
	if sub.Device != "" {
		rule, id = RuleLoginDevice, sub.Device
	}
	check := &passwordCheck{places: [2]place{
		{rule: rule, id: id, attempt: s.attempts.fingerprint(id, password)},
		{rule: RuleLoginPassword, id: sub.Password, attempt: email},
	}}
	ttl := s.checkInFlight()
	var of [2]int // each place's rule among rules
	rules := s.rules(FlowSignIn, sub)
	for i, p := range check.places {
		rules, of[i] = withPlace(rules, p.rule, p.id, p.attempt, ttl)
	}
	d, err := s.decide(ctx, rules...)
	if err != nil {
		return nil, OutcomeUnavailable, unavailable("checking limits", err)
	}
	if !d.Allowed {
		return nil, OutcomeRejected, s.rejectSignIn(d, email, source, at)
	}
	for _, j := range of {
		if d.Results[j].InFlight {
			// None taken (all or none): each waited for in turn.
			return s.waitForPlaces(ctx, check, email, source, at)
		}
	}
	for i, j := range of {
		check.places[i].token = d.Results[j].Token // "" for a retyped failure: no place to give back
	}
	return check, 0, nil
}

// waitForPlaces takes check's places one by one (ratelimit.Store's
// BeginAttempt) for a sign-in its limits admitted while the checks in
// flight held them: it waits for each as it waits for a hashing slot, at
// most the hasher's wait, so that sign-ins at once with the right
// password each get theirs as the one before is done, while guesses get
// the lock their failures make. A check refused is rejected as the lock
// refuses, as of at.
//
// The account's place first, then the password's, in every check: no
// check holds the password's place while it waits for an account's, so
// none waits for a place that a check waiting on it holds.
func (s *Service) waitForPlaces(ctx context.Context, check *passwordCheck, email, source string, at time.Time) (*passwordCheck, Outcome, error) {
	var deadline time.Time
	for i := range check.places {
		p := &check.places[i]
		for {
			b, err := s.limits.BeginAttempt(ctx, p.rule, p.id, p.attempt, s.checkInFlight())
			if err != nil {
				s.endCheck(ctx, check)
				return nil, OutcomeUnavailable, unavailable("checking limits", err)
			}
			if b.Allowed {
				p.token = b.Token // "" for a retyped failure: no place to give back
				break
			}
			if deadline.IsZero() {
				deadline = time.Now().Add(s.hasher.maxWait)
			}
			if b.Locked || !time.Now().Add(placePoll).Before(deadline) || !sleepCtx(ctx, placePoll) {
				s.endCheck(ctx, check)
				wait := b.RetryAfter
				if !b.Locked {
					// A place frees as soon as a check in flight is done.
					wait = min(wait, time.Second)
				}
				// A sprayed password's lock is named by its rule, as
				// rejectingRule names it: it is no lockout of anyone's.
				refusing := RuleLockout
				if p.rule == RuleLoginPassword {
					refusing = RuleLoginPassword
				}
				s.record(Event{At: at, Kind: EventLoginRejected, Account: email, Source: source, Rule: refusing})
				return nil, OutcomeRejected, &LimitedError{RetryAfter: wait, admitted: true}
			}
		}
	}
	return check, 0, nil
}

// withPlace gives the lockable rule of rules named rule for id a place
// towards its lockout for attempt, counting for ttl (ratelimit.Rule.Place),
// and returns rules and that rule's index; rules without one get one,
// lock-only.
func withPlace(rules []ratelimit.Rule, rule, id, attempt string, ttl time.Duration) ([]ratelimit.Rule, int) {
	p := &ratelimit.Place{Attempt: attempt, TTL: ttl}
	for i := range rules {
		if r := &rules[i]; r.Name == rule && r.ID == id && r.Lockable {
			r.Place = p
			return rules, i
		}
	}
	return append(rules, ratelimit.Rule{Name: rule, ID: id, Lockable: true, Place: p}), len(rules)
}

// startCheck bounds the password check that holds check's places: the
// check goes on under the context returned, well inside its places' time,
// so that no place runs out under a check still under way (a database
// that stalls): its failure, if any, is counted before then, for the
// counting has a bound of its own (afterDecision). end gives the places
// back (call it once the failure is counted), but for a failure that
// could not be counted (uncountedFailure): its place then stands for it
// until its time runs out, so that a Redis that stalls after each hash
// lets no more guesses through than the threshold in that time.
func (s *Service) startCheck(ctx context.Context, check *passwordCheck) (_ context.Context, end func()) {
	checkCtx, cancel := context.WithTimeout(context.WithValue(ctx, passwordCheckKey{}, check), checkBound)
	return checkCtx, func() {
		cancel()
		s.endCheck(ctx, check)
	}
}

// endCheck gives back the places check holds, but for those whose
// failure could not be counted.
func (s *Service) endCheck(ctx context.Context, check *passwordCheck) {
	// Given back whether or not the client waits: a place kept would hold
	// the account, or the password, until its time ran out.
	var after context.Context
	for i := range check.places {
		p := &check.places[i]
		if p.token == "" || p.uncounted {
			continue
		}
		if after == nil {
			var cancel context.CancelFunc
			after, cancel = s.afterDecision(ctx)
			defer cancel()
		}
		if err := s.limits.EndAttempt(after, p.rule, p.id, p.token); err != nil {
			s.log.WarnContext(ctx, "password check's place towards a lock not given back", "rule", p.rule, "err", err)
		}
		p.token = ""
	}
}

// passwordCheck is what a password check's context carries of its places
// towards the locks (admitCheck): the account's or the known device's,
// then the password's spraying lock.
type passwordCheck struct {
	places [2]place
}

// place is a password check's place towards the lock of id under rule,
// for attempt (ratelimit.Place).
type place struct {
	rule, id, attempt string
	// token is the place's (ratelimit.Begun), "" when none is held.
	token string
	// uncounted is set once the check's failure could not be counted
	// towards this lock.
	uncounted bool
}

type passwordCheckKey struct{}

// uncountedFailure notes that the failure of the password check under ctx
// could not be counted towards the lock of rule: its place there is not
// given back.
func uncountedFailure(ctx context.Context, rule string) {
	check, ok := ctx.Value(passwordCheckKey{}).(*passwordCheck)
	if !ok {
		return
	}
	for i := range check.places {
		if check.places[i].rule == rule {
			check.places[i].uncounted = true
		}
	}
}

// sleepCtx waits for d, or until ctx is done: false if it is.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// rejectSignIn records the rejection d of a sign-in for email from source,
// as of at, and returns its error.
func (s *Service) rejectSignIn(d ratelimit.Decision, email, source string, at time.Time) error {
	s.record(Event{At: at, Kind: EventLoginRejected, Account: email, Source: source, Rule: rejectingRule(d)})
	return &LimitedError{RetryAfter: d.RetryAfter}
}

// checkPassword is the rest of a sign-in admitted by its limits, from the
// known device device ("" for any other browser).
func (s *Service) checkPassword(ctx context.Context, req LoginRequest, email, source, device string) (LoginResult, Outcome, error) {
	// A browser that is not a known device is held, whatever its
	// password, while new-device verification applies (verification.go).
	held := device == "" && s.verificationApplies()
	// Where it does not, such a browser typing a breached password is
	// held all the same, right or wrong, for an account or none: a right
	// one never signs it in, and were only the right one held, the held
	// answer would tell a stuffing run of breached pairs which of them
	// were right. Looked up for every one, so that the right one takes no
	// longer either. A lookup that failed holds it as well (breached.go):
	// were it let through, a run that made the corpus fail would have its
	// answers back.
	var breached, unknown bool
	if device == "" && !held {
		breached, unknown = s.lookUpPassword(ctx, req.Password)
	}
	held = held || unknown
	// Attack mode may have come on while the password was hashed: the
	// browser is held then, whatever its password, so that the sign-ins
	// in flight as attack mode starts are answered alike, the right
	// password's as the others'.
	heldNow := func() bool { return held || (device == "" && s.verificationApplies()) }
	user, err := s.UserByEmail(ctx, email)
	switch {
	case errors.Is(err, ErrNoUser):
		if err := s.hasher.VerifyUnknown(ctx, req.Password); err != nil {
			return LoginResult{}, OutcomeUnavailable, err
		}
		res, err := s.failedOrHeld(ctx, heldNow() || breached, User{Email: email}, source, device, req.Password)
		return res, OutcomeUnknownAccount, err
	case err != nil:
		return LoginResult{}, OutcomeUnavailable, err
	}
	verify := s.hasher.Verify
	if device != "" {
		verify = s.hasher.VerifyTrusted
	}
	ok, rehash, err := verify(ctx, user.PasswordHash, req.Password)
	if err != nil {
		return LoginResult{}, OutcomeUnavailable, err
	}
	// A disabled account's right password takes the wrong password's
	// path from here: the hash was verified alike, and the failure is
	// counted, recorded and answered alike, so that nothing (status,
	// body, time, a lockout that comes or not) tells that it is disabled.
	if !ok || user.Disabled() {
		res, err := s.failedOrHeld(ctx, heldNow() || breached, user, source, device, req.Password)
		return res, OutcomeFailed, err
	}
	// The right password. Held, it is not rehashed, and is counted as a
	// wrong one is (verification.go). Not held, a breached one from a
	// browser that is not a known device is held all the same.
	// Held too if attack mode came on while the password was hashed,
	// rather than given a session that attack mode's start would have to
	// catch (SignOutNewDevices).
	verifying := heldNow()
	if !verifying && breached {
		res, err := s.hold(ctx, user, source, req.Password, true, false)
		return res, OutcomeHeld, err
	}
	// Held before the account's factors are read: an account with a
	// factor is held as every other, with the same answer after the same
	// work, so that a stuffing run learns neither that the password was
	// right nor that the account has a factor. Its mailed link leads to
	// the second step (ConfirmSignIn): the factor is still asked for. Or
	// the held answer's own second step takes the factor's code in place
	// of the link (mfa_held.go).
	if verifying {
		res, err := s.hold(ctx, user, source, req.Password, false, true)
		return res, OutcomeHeld, err
	}
	// An account with a second factor gets its second step instead of a
	// session (mfa_signin.go).
	if has, err := s.hasFactors(ctx, user.ID); err != nil {
		return LoginResult{}, OutcomeUnavailable, err
	} else if has {
		passwordHash, err := s.rehashed(ctx, user, req.Password, rehash, device)
		if err != nil {
			return LoginResult{}, OutcomeUnavailable, err
		}
		// Other browsers never get this far with a breached password.
		mustChange := device != "" && s.signedInBreached(ctx, req.Password)
		res, stepped, err := s.secondStepOrNone(ctx, user, passwordHash, device, source, mustChange)
		if stepped {
			if errors.Is(err, ErrMFARequired) {
				return res, OutcomeStep, err
			}
			return res, OutcomeUnavailable, err
		}
		// A remembered browser: a known device, never held.
		res, err = s.signedIn(ctx, req, user, passwordHash, source, device, mustChange, "")
		if err != nil {
			return res, OutcomeUnavailable, err
		}
		return res, OutcomeSucceeded, nil
	}
	res, err := s.succeeded(ctx, req, user, source, device, rehash)
	if err != nil {
		// A password replaced meanwhile, or a store failing: no sign-in,
		// and no failure either.
		return res, OutcomeUnavailable, err
	}
	return res, OutcomeSucceeded, nil
}

// rejectingRule names what rejected a request for events and the
// dashboard: the lockout if the account or the device was locked, else
// the first rule. A sprayed password's lock is no lockout of anyone's:
// it is named by its rule.
func rejectingRule(d ratelimit.Decision) string {
	// The results walked in place: Decision.Rejected would copy them for
	// each rejection of a flood.
	first := ""
	for _, r := range d.Results {
		if r.Allowed {
			continue
		}
		if r.Locked && r.Name != RuleLoginPassword {
			return RuleLockout
		}
		if first == "" {
			first = r.Name
		}
	}
	return first
}

// failed counts a failed attempt towards the lockout of the known device
// it came from, or else of the account, and records it. A device's lock
// holds that browser only, and the account's lockout never counts it. The
// password tried goes along as a fingerprint (attempts.go): retyping one
// that already failed counts once. The failure counts towards the
// password's spraying lock too, once per account (spraying.go).
func (s *Service) failed(ctx context.Context, email string, userID int64, source, device, password string) error {
	s.record(Event{Kind: EventLoginFailed, Account: email, UserID: userID, Source: source})
	return s.countFailed(ctx, email, userID, source, device, password)
}

// countFailed counts an attempt as failed does, without recording it:
// towards the lockout, then the spraying lock.
func (s *Service) countFailed(ctx context.Context, email string, userID int64, source, device, password string) error {
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	// The lockout first: a failure to count towards the spraying lock
	// must never cost the account's or the device's count.
	err := s.countFailure(ctx, email, userID, source, device, password)
	if serr := s.sprayFailed(ctx, email, source, s.sprayKeys.of(password)); serr != nil {
		uncountedFailure(ctx, RuleLoginPassword)
		s.log.WarnContext(ctx, "failure not counted towards password spraying", "err", serr)
	}
	return err
}

// countFailure counts a failed attempt towards the lockout of the known
// device it came from, or else of the account.
func (s *Service) countFailure(ctx context.Context, email string, userID int64, source, device, password string) error {
	if device != "" {
		f, err := s.limits.Fail(ctx, RuleLoginDevice, device, s.attempts.fingerprint(device, password))
		if err != nil {
			uncountedFailure(ctx, RuleLoginDevice)
			return unavailable("counting failure", err)
		}
		if f.LockedNow {
			s.record(Event{Kind: EventLockout, Account: email, UserID: userID, Source: source, Detail: map[string]string{
				"device": "known", "level": fmt.Sprint(f.Level), "until": s.now().Add(f.LockedFor).UTC().Format(time.RFC3339)}})
		}
		return ErrInvalidCredentials
	}
	f, err := s.limits.Fail(ctx, RuleLoginAccount, email, s.attempts.fingerprint(email, password))
	if err != nil {
		uncountedFailure(ctx, RuleLoginAccount)
		return unavailable("counting failure", err)
	}
	if f.LockedNow {
		s.recordLockout(ctx, email, userID, source, f, nil)
	}
	return ErrInvalidCredentials
}

// afterDecisionSlack is what the work that follows a verified password
// may take beyond the Redis bound: writing the lockout to Postgres.
const afterDecisionSlack = 5 * time.Second

// afterDecision returns the context for the work that must follow a
// password check (counting a failure, recording a lockout, clearing one
// after a success): a client that hangs up once its password is hashed
// neither escapes the count nor leaves a lock or a failure count behind,
// and its cancelled request never reaches Redis as an error. The work is
// still bounded: by the Redis bound (each Redis call has it already) and
// afterDecisionSlack, so that the failure count, which a sign-in must not
// skip, gets the same time as the decision did. The bound is each step's,
// not the request's: a flow that detaches several steps in turn (a second
// step clears its failures, then stores its session) may take a bound for
// each against a stalled database, so that a slow first step does not
// leave the next without time.
//
// Every change that is recorded (an owner's password or factor, an
// operator's act) is stored under it too: a client that hangs up as the
// change commits would otherwise leave it stored without its event, its
// webhook or its owner's notice.
func (s *Service) afterDecision(ctx context.Context) (context.Context, context.CancelFunc) {
	redis := s.cfg.RedisTimeout
	if redis <= 0 {
		redis = ratelimit.DefaultTimeout
	}
	return context.WithTimeout(context.WithoutCancel(ctx), redis+afterDecisionSlack)
}

func (s *Service) succeeded(ctx context.Context, req LoginRequest, user User, source, device string, rehash bool) (LoginResult, error) {
	passwordHash, err := s.rehashed(ctx, user, req.Password, rehash, device)
	if err != nil {
		return LoginResult{}, err
	}
	// A breached password signs a known device in to change it and to
	// nothing else (breached.go); other browsers never get this far with
	// one.
	mustChange := device != "" && s.signedInBreached(ctx, req.Password)
	return s.signedIn(ctx, req, user, passwordHash, source, device, mustChange, "")
}

// rehashed stores a new hash of the right password when rehash says the
// stored one is outdated, and returns the account's hash after it.
// ErrInvalidCredentials if the password was replaced meanwhile. From a
// known device (device set) the new hash is a returning browser's, which
// gives way to no other sign-in, its own included (giveway.go).
func (s *Service) rehashed(ctx context.Context, user User, password string, rehash bool, device string) (string, error) {
	passwordHash := user.PasswordHash
	if rehash {
		hashNew := s.hasher.Hash
		if device != "" {
			hashNew = s.hasher.hashTrusted
		}
		if hash, err := hashNew(ctx, password); err == nil {
			switch err := s.rehashPassword(ctx, user.ID, passwordHash, hash); {
			case errors.Is(err, ErrPasswordChanged):
				return s.rehashedMeanwhile(ctx, user, password, device)
			case err != nil:
				s.log.Warn("storing rehashed password", "user_id", user.ID, "err", err)
			default:
				passwordHash = hash
			}
		}
	}
	return passwordHash, nil
}

// rehashedMeanwhile is the account's hash once a rehash found the hash it
// verified replaced: by another sign-in's rehash of the same password,
// which a sign-in at the same moment makes whenever the parameters have
// changed, or by a new password. The first signs this one in too, under
// the hash that replaced its own; the second does not
// (ErrInvalidCredentials). Only a sign-in whose password was right gets
// here, so the second check tells nothing an attacker did not know.
func (s *Service) rehashedMeanwhile(ctx context.Context, user User, password, device string) (string, error) {
	current, err := s.store.UserByEmail(ctx, user.Email)
	if errors.Is(err, ErrNoUser) || (err == nil && current.ID != user.ID) {
		return "", ErrInvalidCredentials
	}
	if err != nil {
		return "", s.dbDown("reading user", err)
	}
	verify := s.hasher.Verify
	if device != "" {
		verify = s.hasher.VerifyTrusted
	}
	ok, _, err := verify(ctx, current.PasswordHash, password)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", ErrInvalidCredentials
	}
	return current.PasswordHash, nil
}

// signedIn makes the session of a sign-in decided, with the account's
// password hash passwordHash, from the known device device ("" for
// another browser, which becomes one), and records it. factor names the
// second factor the sign-in passed, "" for none: a new browser it
// signed in becomes a verified device, which attack mode's start keeps
// (SignOutNewDevices).
func (s *Service) signedIn(ctx context.Context, req LoginRequest, user User, passwordHash, source, device string, mustChange bool, factor string) (LoginResult, error) {
	// Decided: the sign-in is finished and recorded whether or not its
	// client waits. A hang-up as its device or session commits would
	// otherwise leave them stored with no event and no notice.
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	if device != "" {
		if _, err := s.limits.Clear(ctx, RuleLoginDevice, device); err != nil {
			s.log.Warn("clearing device failures after sign-in", "err", err)
		}
	}
	now := s.now()
	var cookie DeviceCookie
	if device != "" {
		s.touchDevice(ctx, device)
		cookie = DeviceCookie{Name: s.devices.CookieName(user.Email), Value: req.DeviceCookie, Expires: now.Add(s.cfg.DeviceTTL)}
	} else {
		var nonce string
		cookie, nonce = s.devices.Issue(user.Email, now)
		// Before the session: a password replaced while this one was
		// being verified neither signs in nor adds a device.
		if err := s.addDevice(ctx, user, passwordHash, nonce, factor != ""); errors.Is(err, ErrPasswordChanged) {
			return LoginResult{}, ErrInvalidCredentials
		} else if err != nil {
			return LoginResult{}, err
		}
		s.record(Event{Kind: EventNewDevice, Account: user.Email, UserID: user.ID, Source: source})
	}
	if err := s.Logout(ctx, req.OldSession); err != nil {
		return LoginResult{}, err
	}
	// Only while passwordHash is still the account's: a password replaced
	// while this one was verified ends every session, this one included.
	sess, err := s.createSessionWith(ctx, user, passwordHash, mustChange, req.Client)
	if errors.Is(err, ErrPasswordChanged) {
		return LoginResult{}, ErrInvalidCredentials
	}
	if err != nil {
		return LoginResult{}, err
	}
	// The owner's activity list names the browser (fixed words, never
	// the header itself: DescribeBrowser).
	e := Event{Kind: EventLoginSucceeded, Account: user.Email, UserID: user.ID, Source: source,
		Detail: map[string]string{"browser": DescribeBrowser(req.Client.UserAgent)}}
	if factor != "" {
		e.Detail["factor"] = factor
	}
	if mustChange {
		e.Detail["password"] = "breached"
	}
	if device == "" {
		// The owner's activity list says which sign-ins were new devices'.
		if e.Detail == nil {
			e.Detail = map[string]string{}
		}
		e.Detail["device"] = "new"
	}
	s.record(e)
	if device == "" {
		s.notifyNewDevice(user, source, req.Client.UserAgent)
	}
	return LoginResult{Session: sess, Device: cookie}, nil
}

func (s *Service) record(e Event) {
	if e.At.IsZero() {
		e.At = s.now()
	}
	s.metrics.observe(e)
	s.events.Record(e)
}

// rules returns the rules of flow that apply to the request s, with their
// limits.
func (s *Service) rules(flow Flow, sub Subject) []ratelimit.Rule {
	return s.book.rulesFor(flow, sub)
}

// admitClient decides the rules of flow that count the client c alone
// (its address and network), and refuses it, recording a rejection of
// kind, if they are spent: what a request does before anything else when
// it names no account yet, or none at all (a link's token, a malformed
// sign-in).
func (s *Service) admitClient(ctx context.Context, flow Flow, c Client, kind string) error {
	d, err := s.decide(ctx, s.rules(flow, Subject{Client: c})...)
	if err != nil {
		return unavailable("checking limits", err)
	}
	if !d.Allowed {
		s.record(Event{Kind: kind, Source: c.Source(), Rule: rejectingRule(d)})
		return &LimitedError{RetryAfter: d.RetryAfter}
	}
	return nil
}

// decide checks a request's rules, timing the decision for the metrics:
// one that Redis or the failure policy made. A rejection the memory of
// rejections answered took no round trip, and timed it would bury the
// round trips' times under a flood's, when they matter most.
func (s *Service) decide(ctx context.Context, rules ...ratelimit.Rule) (ratelimit.Decision, error) {
	start := time.Now()
	d, err := s.limits.AllowAll(ctx, rules...)
	if !d.FromMemory {
		s.metrics.observeDecision(time.Since(start))
	}
	return d, err
}

// dbDown counts a Postgres failure and wraps it as ErrUnavailable. A call
// whose caller gave up (a client that hung up: context.Canceled) is
// wrapped alike but not counted, as the limits count no Redis error for
// one (ratelimit.IsOutage): it is no news about Postgres, and the count
// pages (XCloakPostgresErrors). A timeout still counts.
func (s *Service) dbDown(what string, err error) error {
	if !errors.Is(err, context.Canceled) {
		s.metrics.dbErrors.Inc()
	}
	return unavailable(what, err)
}
