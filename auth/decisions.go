package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/xcloak/xcloak/ratelimit"
)

// The decision API: an application that keeps its own users and passwords
// asks, before it checks a password, whether the attempt may go ahead
// (Decide), and tells the result afterwards (AttemptOutcome). XCloak never
// sees the password. The attempt meets the rules of XCloak's own sign-in
// (or reset request), in one Redis round trip as Login does: the network
// rules are shared with XCloak's own pages, so one attacker meets one ladder
// everywhere; the account's rules and lockout are the application's own,
// for its accounts are namespaced by the application's name (appAccount),
// so that its "alice" is neither another application's nor XCloak's.
//
// Every decision and outcome records the events XCloak's own sign-in
// records, with Detail "app" naming the application, and feeds attack
// detection alike.

// The kinds of attempt an application asks about.
const (
	AttemptLogin = "login"
	AttemptReset = "reset"
)

// The results an application reports.
const (
	ResultSuccess = "success"
	ResultFailure = "failure"
)

// Bounds of what an application sends.
const (
	// MaxAccountBytes bounds an application's account identifier.
	MaxAccountBytes = 320
	// MaxDeviceBytes bounds an application's device id.
	MaxDeviceBytes = 512
)

// Events of the decision API alone; the others are XCloak's own, with
// Detail "app".
const (
	// EventResetFailed: an application reported that a reset it asked
	// about failed. XCloak's own resets have no such event.
	EventResetFailed = "reset_failed"
	// EventAttemptAllowed: an application's sign-in was let go ahead
	// (Detail "challenge" when it was challenged); its outcome is recorded
	// when reported. It counts the application's attempts on the
	// dashboard, not the deployment's sign-ins, which its outcome counts.
	EventAttemptAllowed = "attempt_allowed"
)

// ruleAttemptUsed marks an attempt id's nonce as given its outcome: a limit
// of one per nonce for the id's life, in the limits every replica shares.
// It is no rule of the table: it limits nothing anyone could set.
const ruleAttemptUsed = "attempt_used"

// ErrUnknownAttempt: an attempt id that is unknown, forged, expired,
// another key's or used already; alike by design.
var ErrUnknownAttempt = errors.New("auth: unknown attempt")

// FieldError is ErrInvalidRequest naming the field at fault.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return "auth: invalid " + e.Field + ": " + e.Message }

// Is makes errors.Is(err, ErrInvalidRequest) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidRequest }

// DeniedError is a decision's refusal: ErrLimited, saying whether a lockout
// (of the account or the known device) or a rate limit refused. The
// application is told which, unlike a browser: it knows its accounts.
type DeniedError struct {
	Locked     bool
	RetryAfter time.Duration
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("auth: attempt denied (locked %t); retry after %s", e.Locked, e.RetryAfter)
}

// Is makes errors.Is(err, ErrLimited) true.
func (e *DeniedError) Is(target error) bool { return target == ErrLimited }

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up.
func (e *DeniedError) RetryAfterSeconds() int {
	return (&LimitedError{RetryAfter: e.RetryAfter}).RetryAfterSeconds()
}

// AttemptRequest is an application's question.
type AttemptRequest struct {
	// Kind is AttemptLogin or AttemptReset.
	Kind string
	// Account is the application's identifier of the account, as typed:
	// 1 to MaxAccountBytes bytes without control characters. It is folded
	// (FoldAccount) before it is counted.
	Account string
	// ClientIP is the address of the application's client.
	ClientIP string
	// Device is the application's opaque id of the client's device; ""
	// if none.
	Device string
}

// AttemptDecision is a decision that lets an attempt go ahead.
type AttemptDecision struct {
	// Challenge: the device is no known device of the account while
	// XCloak would hold a new browser of its own (new-device
	// verification): the application should verify the user another way
	// before it grants a session, whatever the password.
	Challenge bool
	// AttemptID names the attempt in its outcome.
	AttemptID string
}

// FoldAccount folds an application's account identifier so that its forms
// that look alike count alike: without invisible characters (a zero-width
// space, a soft hyphen, a byte order mark, a variation selector, which
// many lookups ignore), lower case, NFKC, trimmed. Accents are kept: an
// application whose lookup tells "renee" from "renée" has two accounts
// there, and merging them would let one's owner relax the other's limits
// (a known device, a lockout ended by a reset); an application whose
// lookup ignores accents sends the account as its lookup resolves it
// (docs/DECISION-API.md). It is idempotent: a folded identifier folds to
// itself, so that one listed on the dashboard can be unlocked.
func FoldAccount(account string) string {
	if isASCII(account) {
		// Nothing invisible, no compatibility forms: the common case, at
		// a fraction of the cost.
		return strings.TrimSpace(strings.ToLower(account))
	}
	// One pass can make what a next one changes (J and a combining caron
	// compose to ǰ only once lower case), so passes run until one changes
	// nothing: two for anything TestFoldAccountSettles finds, and the
	// bound keeps hostile input from running longer.
	for range 3 {
		next := foldAccountOnce(account)
		if next == account {
			break
		}
		account = next
	}
	return account
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// foldAccountOnce is one pass of FoldAccount. Each letter becomes the
// lower case of its capital, not only its lower case: a final sigma (ς)
// and σ are one letter, as are ſ and s, and ı and i, whose capitals are
// one, and which lookups that ignore case take as one (Java's
// equalsIgnoreCase, .NET's invariant upper case, Go's EqualFold for all
// but ı); lower case alone would leave an attacker locked out of one
// spelling free to go on under the other. Composed before and after, so
// that canonically equivalent forms (Α and a combining iota, ᾼ) fold
// alike.
func foldAccountOnce(account string) string {
	visible := strings.Map(func(r rune) rune {
		if invisible(r) {
			return -1
		}
		return r
	}, account)
	folded := strings.Map(func(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }, norm.NFKC.String(visible))
	return strings.TrimSpace(norm.NFKC.String(folded))
}

// invisible reports whether r is drawn as nothing: a format character
// (zero-width space, soft hyphen, byte order mark, a direction override),
// another default-ignorable code point, or a variation selector.
func invisible(r rune) bool {
	return unicode.In(r, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

// appAccount is the identity an application's account has in the limits,
// events and the lockout log: "app NAME ACCOUNT". XCloak's own accounts
// never hold a space, and a name never does, so no two applications' and
// no application's and XCloak's own accounts meet.
func appAccount(app, folded string) string { return "app " + app + " " + folded }

// ParseAppAccount reads an application's account as the dashboard lists
// it, "app NAME ACCOUNT", and returns its identity, the account folded
// (FoldAccount) as the decision API folds it; false if s is no such
// thing.
func ParseAppAccount(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, "app ")
	if !ok {
		return "", false
	}
	name, account, _ := strings.Cut(rest, " ")
	if len(account) > MaxAccountBytes || !printable(account) {
		return "", false
	}
	id := appAccount(name, FoldAccount(account))
	return id, isAppAccount(id)
}

// isAppAccount reports whether id is an application's account identity as
// appAccount makes it, with a valid name and a folded account.
func isAppAccount(id string) bool {
	_, ok := appOf(id)
	return ok
}

// appOf returns the application's name in id when id is an application's
// account identity as appAccount makes it.
func appOf(id string) (name string, ok bool) {
	rest, ok := strings.CutPrefix(id, "app ")
	if !ok {
		return "", false
	}
	name, account, ok := strings.Cut(rest, " ")
	if !ok || CheckAPIKeyName(name) != nil || account == "" || FoldAccount(account) != account ||
		len(account) > MaxAccountBytes || !printable(account) {
		return "", false
	}
	return name, true
}

// appLockGroup is the class of an identity among a rule's logs, failure
// counts and locks in the in-process store
// (ratelimit.LockoutPolicy.Group): "app NAME" for an application's
// accounts, "app" for every application's known devices (whose identity
// names no application), "" for XCloak's own, none of which begins "app ".
// A decision API key's holder names its accounts as it likes and may fail
// them at will; set apart, a flood of them while Redis is unreachable
// pushes out its own, not XCloak's accounts' or another application's
// (though applications' devices share one class).
func appLockGroup(id string) string {
	rest, ok := strings.CutPrefix(id, "app ")
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, " ")
	if !ok {
		return "app"
	}
	return id[:len("app ")+len(name)]
}

// appDetail is the detail of an event of app's attempts: "app" the
// application, and "key" the key's name where that is another, as the
// key events say it: while two keys speak for one application (a
// rotation), an administrator can tell which of them to revoke.
func appDetail(app APIKey) map[string]string {
	detail := map[string]string{"app": app.App}
	if app.Name != app.App {
		detail["key"] = app.Name
	}
	return detail
}

// appDevice is the identity of an application's known device in the
// limits: "app " and its hash, longer than any nonce of XCloak's own.
func appDevice(hash string) string { return "app " + hash }

// checkAttempt validates req and returns the folded account and the
// client's address.
func checkAttempt(req AttemptRequest) (string, netip.Addr, error) {
	if req.Kind != AttemptLogin && req.Kind != AttemptReset {
		return "", netip.Addr{}, &FieldError{"kind", `must be "login" or "reset"`}
	}
	// Bounded and checked before it is folded, which costs more the
	// longer it is.
	switch {
	case len(req.Account) > MaxAccountBytes:
		return "", netip.Addr{}, &FieldError{"account", fmt.Sprintf("must be at most %d bytes", MaxAccountBytes)}
	case !printable(req.Account):
		return "", netip.Addr{}, &FieldError{"account", "must be UTF-8 without control characters"}
	}
	account := FoldAccount(req.Account)
	switch {
	case account == "":
		return "", netip.Addr{}, &FieldError{"account", "is required"}
	case len(account) > MaxAccountBytes:
		return "", netip.Addr{}, &FieldError{"account", fmt.Sprintf("must be at most %d bytes", MaxAccountBytes)}
	}
	if req.ClientIP == "" {
		return "", netip.Addr{}, &FieldError{"client_ip", "is required"}
	}
	addr, err := netip.ParseAddr(req.ClientIP)
	if err != nil || addr.Zone() != "" {
		return "", netip.Addr{}, &FieldError{"client_ip", "must be an IPv4 or IPv6 address, such as 192.0.2.1 or 2001:db8::1"}
	}
	if len(req.Device) > MaxDeviceBytes || !printable(req.Device) {
		return "", netip.Addr{}, &FieldError{"device", fmt.Sprintf("must be at most %d bytes of UTF-8 without control characters", MaxDeviceBytes)}
	}
	return account, addr.Unmap(), nil
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, unicode.IsControl)
}

// knownAs is the identity of an application's account in its known
// devices: the account as the application sent it, not folded. Folding
// merges spellings the application may tell apart as accounts of their
// own (another case, a zero-width space), which in the limits only makes
// each stricter; but a known device relaxes them, so the owner of one
// spelling would make his devices known for the other and push its
// owner's out. A reset, which only forgets, forgets the devices of every
// spelling (appResetCompleted).
func knownAs(account string) string { return account }

// Decide decides an application's attempt. Errors: *FieldError
// (ErrInvalidRequest), *DeniedError (ErrLimited), ErrUnavailable.
func (s *Service) Decide(ctx context.Context, app APIKey, req AttemptRequest) (AttemptDecision, error) {
	account, addr, err := checkAttempt(req)
	if err != nil {
		return AttemptDecision{}, err
	}
	client := Client{Addr: addr}
	now := s.now()
	a := attempt{KeyID: app.ID, App: app.App, Kind: req.Kind, Account: account, Client: addr.String(), IssuedAt: now.Unix(), IssuedMilli: now.UnixMilli(),
		Devices: base64.RawURLEncoding.EncodeToString(s.decisionKeys.accountHash(app.App, knownAs(req.Account)))}
	if req.Kind == AttemptReset {
		return s.decideReset(ctx, app, client, a)
	}
	d, outcome, err := s.decideLogin(ctx, app, client, req.Device, knownAs(req.Account), a)
	if outcome != 0 {
		s.attack.Observe(SignInAttempt{At: s.now(), Account: appAccount(app.App, account), Client: client, Outcome: outcome})
	}
	return d, err
}

// decideLogin runs FlowSignIn's rules for an application's sign-in: a known
// device is limited and locked on its own, as XCloak's own known browsers
// are. It returns the outcome to observe now: none for an attempt let go
// ahead, which its outcome reports.
//
// The device id is chosen by the application's client (a cookie, say), so
// a client can send a fresh one with every attempt, each a lookup in
// Postgres. Before the lookup, the rules that apply whatever the device
// (the network's) are asked of the limits' memory of rejections
// (ratelimit.Store.Remembered): a client its network's rules are known to
// refuse is refused at once, without the lookup. So a flood over its
// limit costs at most one lookup per memory's lifetime
// (XCLOAK_REJECTION_MEMORY) on each replica: the one that taught it. A
// lookup that found no device, for an attempt that the account's rules
// then refuse (a locked account's), is counted by the network's rules
// (countLookup), which the refusal alone would leave uncounted.
func (s *Service) decideLogin(ctx context.Context, app APIKey, client Client, device, sent string, a attempt) (AttemptDecision, Outcome, error) {
	id := appAccount(app.App, a.Account)
	source := client.Source()
	detail := appDetail(app)
	// missed is set when the device cost a lookup that found none: a
	// refusal then counts it (countLookup).
	missed := false
	refused := func(d ratelimit.Decision) (AttemptDecision, Outcome, error) {
		if missed {
			s.countLookup(ctx, client, source)
		}
		s.record(Event{Kind: EventLoginRejected, Account: id, Source: source, Rule: rejectingRule(d), Detail: detail})
		return AttemptDecision{}, OutcomeRejected, denied(d)
	}
	sub := Subject{Client: client, Account: id}
	if device != "" {
		if d, ok := s.limits.Remembered(s.rules(FlowSignIn, Subject{Client: client})...); ok {
			return refused(d)
		}
		hash := s.decisionKeys.deviceHash(app.App, sent, device)
		a.Device = base64.RawURLEncoding.EncodeToString(hash)
		// Without Postgres the device is held by the account's rules, as
		// Login holds a browser.
		known, looked, err := s.knownAppDevice(ctx, hash)
		if err != nil {
			s.log.WarnContext(ctx, "application device not checked", "err", err)
		} else if known {
			a.Known = true
			sub.Device = appDevice(a.Device)
		}
		missed = looked && err == nil && !known
	}
	// The attempt holds a place towards the lockout it counts towards from
	// now to its outcome (endAppAttempt), taken with the decision, as
	// XCloak's own password checks take theirs (admitCheck): attempts
	// asked at once one failure short of the lock do not all go ahead,
	// each password then checked by the application. One the places
	// refuse, counted by its limits, is answered at once, with no wait for
	// a place: a place frees when an outcome comes, which only the
	// application knows of.
	rule, lockID := a.lockIdentity(id)
	rules, placed := withPlace(s.rules(FlowSignIn, sub), rule, lockID, "", s.checkInFlight())
	d, err := s.decide(ctx, rules...)
	if err != nil {
		s.record(Event{Kind: EventLoginUnavailable, Source: source, Detail: detail})
		return AttemptDecision{}, OutcomeUnavailable, unavailable("checking limits", err)
	}
	if !d.Allowed {
		return refused(d)
	}
	if p := d.Results[placed]; p.InFlight {
		s.record(Event{Kind: EventLoginRejected, Account: id, Source: source, Rule: RuleLockout, Detail: detail})
		return AttemptDecision{}, OutcomeRejected, &DeniedError{RetryAfter: min(p.RetryAfter, time.Second)}
	}
	a.Place = d.Results[placed].Token
	a.Challenge = !a.Known && s.verificationApplies()
	if a.Challenge {
		detail["challenge"] = "true"
	}
	s.record(Event{Kind: EventAttemptAllowed, Account: id, Source: source, Detail: detail})
	return AttemptDecision{Challenge: a.Challenge, AttemptID: s.decisionKeys.issue(a)}, 0, nil
}

// decideReset runs FlowResetRequest's rules for an application's reset
// request.
func (s *Service) decideReset(ctx context.Context, app APIKey, client Client, a attempt) (AttemptDecision, error) {
	id := appAccount(app.App, a.Account)
	source := client.Source()
	detail := appDetail(app)
	d, err := s.decide(ctx, s.rules(FlowResetRequest, Subject{Client: client, Account: id})...)
	if err != nil {
		return AttemptDecision{}, unavailable("checking limits", err)
	}
	if !d.Allowed {
		s.record(Event{Kind: EventResetRejected, Account: id, Source: source, Rule: rejectingRule(d), Detail: detail})
		return AttemptDecision{}, denied(d)
	}
	s.record(Event{Kind: EventResetRequested, Account: id, Source: source, Detail: detail})
	return AttemptDecision{AttemptID: s.decisionKeys.issue(a)}, nil
}

// denied is the refusal of decision d: locked when a lockout of the
// account or the known device refused it.
func denied(d ratelimit.Decision) *DeniedError {
	return &DeniedError{Locked: rejectingRule(d) == RuleLockout, RetryAfter: d.RetryAfter}
}

// AttemptOutcome takes an application's report of how the attempt id
// names ended: result is ResultSuccess or ResultFailure. A sign-in's
// failure counts towards the lockout of its known device, or else of the
// account, and a success clears the device's failures and makes the device
// known, exactly as XCloak's own sign-in does (a challenged attempt's
// success as XCloak's own held sign-in: appChallengeSucceeded); both are recorded and
// observed by attack detection. A reset's outcome is recorded, and a
// completed one forgets the account's known devices and ends its lockout,
// as XCloak's own does; it feeds nothing else: XCloak's own resets have no
// failures to count.
//
// Errors: *FieldError for a result that is neither; ErrUnknownAttempt;
// ErrUnavailable.
func (s *Service) AttemptOutcome(ctx context.Context, app APIKey, id, result string) error {
	if result != ResultSuccess && result != ResultFailure {
		return &FieldError{"result", `must be "success" or "failure"`}
	}
	a, ok := s.decisionKeys.open(id, s.now())
	if !ok || !a.reportableBy(app) {
		return ErrUnknownAttempt
	}
	addr, err := netip.ParseAddr(a.Client)
	if err != nil {
		return ErrUnknownAttempt
	}
	// Used once: the first outcome marks the nonce for the id's life, and
	// as long again as a replica's clock may lag, which may take the id
	// for that much longer. An outcome that then fails to be counted
	// (Redis lost meanwhile, 503) has spent its id all the same: reporting
	// it again cannot count it twice. A completed reset whose devices
	// could not be forgotten changed nothing, and gives its id back
	// (releaseAttempt).
	d, err := s.limits.AllowAll(ctx, ratelimit.Rule{Name: ruleAttemptUsed, ID: a.Nonce,
		Limit: ratelimit.Limit{Count: 1, Window: a.ttl() + clockSlack}})
	if err != nil {
		return unavailable("marking attempt used", err)
	}
	if !d.Allowed {
		return ErrUnknownAttempt
	}
	client := Client{Addr: addr}
	account := appAccount(app.App, a.Account)
	source := client.Source()
	detail := appDetail(app)
	if a.Kind == AttemptReset {
		kind := EventResetCompleted
		if result == ResultFailure {
			kind = EventResetFailed
		}
		if result == ResultSuccess {
			forgotten, err := s.appResetCompleted(ctx, app, a, source)
			if err != nil {
				s.releaseAttempt(ctx, a)
				return err
			}
			detail["devices_forgotten"] = fmt.Sprint(forgotten)
		}
		s.record(Event{Kind: kind, Account: account, Source: source, Detail: detail})
		return nil
	}
	if result == ResultFailure {
		s.record(Event{Kind: EventLoginFailed, Account: account, Source: source, Detail: detail})
		err := s.countAppFailure(ctx, app, account, source, a)
		s.attack.Observe(SignInAttempt{At: s.now(), Account: account, Client: client, Outcome: OutcomeFailed})
		if err == nil {
			// A failure that could not be counted keeps its place until
			// its time runs out, as XCloak's own does (uncountedFailure).
			s.endAppAttempt(ctx, account, a)
		}
		return err
	}
	if err := s.appSucceeded(ctx, app, account, client, a); err != nil {
		// A challenged success counts as a failure does
		// (appChallengeSucceeded): one that could not be counted keeps
		// its place too.
		return err
	}
	s.endAppAttempt(ctx, account, a)
	return nil
}

// endAppAttempt gives back the place towards the lockout that the sign-in
// attempt a, of account, took when it was let go ahead (decideLogin).
// An id issued before attempts held places has none.
func (s *Service) endAppAttempt(ctx context.Context, account string, a attempt) {
	if a.Place == "" {
		return
	}
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	rule, id := a.lockIdentity(account)
	if err := s.limits.EndAttempt(ctx, rule, id, a.Place); err != nil {
		s.log.WarnContext(ctx, "application attempt's place towards the lockout not given back", "err", err)
	}
}

// appResetCompleted takes a reset the application reports completed, as a
// reset on XCloak's own page is taken: it forgets the known devices of
// every spelling of the folded account (knownAs; a device that signed in
// with the old password is known no more, on this replica at once and on
// the others within deviceCacheTTL; forgetting relaxes nothing, so
// spellings count alike here as in the limits) and ends the folded
// account's lockout. It returns how many devices it forgot.
// Devices it could not forget are ErrUnavailable, and the lockout is left
// as it was: as XCloak's own reset, which forgets its browsers in the
// transaction that sets the password, it is done whole or not at all.
func (s *Service) appResetCompleted(ctx context.Context, app APIKey, a attempt, source string) (int, error) {
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	account := appAccount(app.App, a.Account)
	var forgotten int
	if s.apps != nil {
		n, err := s.apps.ForgetAppDevices(ctx, s.decisionKeys.accountHash(app.App, a.Account), s.now())
		s.appDeviceCache.purge()
		if err != nil {
			return 0, s.dbDown("forgetting application devices after reset", err)
		}
		forgotten = n
	}
	s.endLockoutAfterReset(ctx, account, 0, source)
	return forgotten, nil
}

// releaseAttempt gives back the id of attempt a, marked used by an
// outcome that could not be taken, so that the application can report it
// again. Only an outcome that changed nothing is given back: one taken
// again must not count twice.
func (s *Service) releaseAttempt(ctx context.Context, a attempt) {
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	if err := s.limits.Reset(ctx, ruleAttemptUsed, a.Nonce); err != nil {
		s.log.WarnContext(ctx, "attempt id not given back; its outcome cannot be reported again", "err", err)
	}
}

// countAppFailure counts a failed sign-in towards the lockout of the known
// device it came from, or else of the account, as countFailure does. No
// password was seen, so every failure counts: none is a retyped one.
func (s *Service) countAppFailure(ctx context.Context, app APIKey, account, source string, a attempt) error {
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	if a.Known {
		f, err := s.limits.Fail(ctx, RuleLoginDevice, appDevice(a.Device), "")
		if err != nil {
			return unavailable("counting failure", err)
		}
		if f.LockedNow {
			detail := appDetail(app)
			detail["device"], detail["level"] = "known", fmt.Sprint(f.Level)
			detail["until"] = s.now().Add(f.LockedFor).UTC().Format(time.RFC3339)
			s.record(Event{Kind: EventLockout, Account: account, Source: source, Detail: detail})
		}
		return nil
	}
	f, err := s.limits.Fail(ctx, RuleLoginAccount, account, "")
	if err != nil {
		return unavailable("counting failure", err)
	}
	if f.LockedNow {
		// Named as the application's other events are: the
		// application, and the key when it is named otherwise.
		s.recordLockout(ctx, account, 0, source, f, appDetail(app))
	}
	return nil
}

// appSucceeded takes a successful sign-in: the known device's failures are
// forgotten, the device becomes (or stays) known, and the sign-in is
// recorded, as a new device's when it was not known. A challenged one is
// taken as appChallengeSucceeded says.
func (s *Service) appSucceeded(ctx context.Context, app APIKey, account string, client Client, a attempt) error {
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	source := client.Source()
	if a.Challenge {
		return s.appChallengeSucceeded(ctx, app, account, client, a)
	}
	if a.Known {
		if _, err := s.limits.Clear(ctx, RuleLoginDevice, appDevice(a.Device)); err != nil {
			s.log.WarnContext(ctx, "clearing device failures after sign-in", "err", err)
		}
	}
	// Only a device the application named can be new: a sign-in without
	// one is no device's.
	isNew := a.Device != "" && !a.Known
	// While attack mode holds new devices, no success makes or keeps a
	// device known: one decided before it started, reported after, was
	// not challenged, as no new device's sign-in is from now on; and one
	// decided known may have been forgotten by SignOutNewDevices since
	// (or been taken for known by another replica's cache a moment
	// after), which storing it would undo. Its next attempt is
	// challenged, as those just before the start are. A known device
	// still listed stays known; its last use is not noted meanwhile.
	inAttack := s.cfg.NewDeviceVerification == VerifyInAttack && s.attack.Active()
	if a.Device != "" && s.apps != nil && !inAttack {
		hash, err := base64.RawURLEncoding.DecodeString(a.Device)
		if err != nil {
			return ErrUnknownAttempt
		}
		gen := s.appDeviceCache.generation()
		added, err := s.apps.AddAppDevice(ctx, app.App, s.decisionKeys.devicesOf(app.App, a), s.decisionKeys.accountHash(app.App, a.Account), hash,
			a.decided(), s.now(), s.cfg.MaxDevices)
		switch {
		case errors.Is(err, ErrResetSince):
			// Its password was checked before the owner reset it: the
			// success stands, the device stays forgotten.
			isNew = false
		case err != nil:
			s.metrics.dbErrors.Inc()
			s.log.ErrorContext(ctx, "adding application device", "err", err)
		default:
			isNew = added || isNew
			// This replica forgets at once a device the new one pushed
			// out, the others within deviceCacheTTL; it reads the new one
			// from the store, and remembers one already known unless a
			// revocation came while it was stored.
			if added {
				s.appDeviceCache.purge()
			}
			s.appDeviceCache.put(appDeviceCacheKey(hash), true, gen, s.now())
		}
	}
	e := Event{Kind: EventLoginSucceeded, Account: account, Source: source, Detail: appDetail(app)}
	if isNew {
		e.Detail["device"] = "new"
	}
	s.record(e)
	if isNew {
		s.record(Event{Kind: EventNewDevice, Account: account, Source: source, Detail: appDetail(app)})
	}
	s.attack.Observe(SignInAttempt{At: s.now(), Account: account, Client: client, Outcome: OutcomeSucceeded})
	return nil
}

// appChallengeSucceeded takes the right password of a challenged attempt
// as XCloak's own sign-in takes a held one. It proves the password alone,
// which in credential stuffing is what the attacker has, and the
// application has yet to verify the user another way, and may never: the
// device does not become known, or the next attempt from it would be let
// through unchallenged. It counts towards the account's lockout as a
// failure does, so that an account which fails to lock after its
// threshold of challenged tries cannot say that one of them was right;
// attack detection sees a held sign-in. Its event says what it was.
func (s *Service) appChallengeSucceeded(ctx context.Context, app APIKey, account string, client Client, a attempt) error {
	source := client.Source()
	detail := appDetail(app)
	detail["challenged"] = "true"
	s.record(Event{Kind: EventLoginSucceeded, Account: account, Source: source, Detail: detail})
	err := s.countAppFailure(ctx, app, account, source, a)
	s.attack.Observe(SignInAttempt{At: s.now(), Account: account, Client: client, Outcome: OutcomeHeld})
	return err
}

// appDeviceCacheKey is an application device's key in appDeviceCache.
func appDeviceCacheKey(hash []byte) string { return string(hash) }

// knownAppDevice reports whether hash is a known device of an
// application's account seen within Config.DeviceTTL, answered for a
// moment from appDeviceCache.
func (s *Service) knownAppDevice(ctx context.Context, hash []byte) (known, looked bool, err error) {
	if s.apps == nil {
		return false, false, unavailable("reading device", errNoAppStore)
	}
	key := appDeviceCacheKey(hash)
	now := s.now()
	if known, ok := s.appDeviceCache.get(key, now); ok {
		return known, false, nil
	}
	gen := s.appDeviceCache.generation()
	known, err = s.apps.KnownAppDevice(ctx, hash, now.Add(-s.cfg.DeviceTTL))
	if err != nil {
		return false, true, s.dbDown("reading device", err)
	}
	s.appDeviceCache.put(key, known, gen, now)
	return known, true, nil
}
