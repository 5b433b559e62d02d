package auth

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The second step. A sign-in whose password was right, for an account
// with a confirmed factor, gets no session but an MFAStep: a token
// (mfa_token) and a binding, the value of a cookie the browser gets with
// it. Both are 256 random bits, stored as their SHA-256
// (FactorStore.AddMFAChallenge); the step lasts MFAConfig.ChallengeTTL
// and works only with both, so a token copied to another browser is
// useless. A right code deletes the step (DELETE ... RETURNING) before the
// session is made, so one step signs in once, however many right codes
// race; a wrong code leaves it for the next try, within the limits.
//
// The limits count every code tried, before it is checked: so an attempt
// is checked only if its count was below the limit, which Redis decides
// atomically, and the count of codes checked is exact however many
// arrive at once. RuleMFANetwork is a rate, right codes and wrong ones
// alike, refused with "too many attempts" (a LimitedError) until its
// window frees a place: a network's honest users who stay below it are
// never refused, however long they go on. RuleMFAAccount counts codes in
// a row towards a lock (ratelimit.Store.Fail), which a right one clears,
// and at the threshold the next try is refused for the lock's time,
// longer at each repeat. Neither is the password's counter: see mfa.go.

// MFAStep is a second step issued to a browser.
type MFAStep struct {
	// Token is the mfa_token the browser sends back with its code.
	Token string
	// Binding is the value of the cookie that binds the step to the
	// browser; the web layer sets it with the answer.
	Binding   string
	ExpiresAt time.Time
}

// SecondStepRequest finishes a sign-in's second step.
type SecondStepRequest struct {
	// Token is the mfa_token, Binding the value of the binding cookie.
	Token, Binding string
	// Code is a TOTP code or a recovery code.
	Code string
	// Remember: skip the second step on this browser for
	// MFAConfig.RememberFor.
	Remember bool
	Client   Client
	// Cookie reads one of the browser's cookies by name ("" if absent):
	// the device cookie's name depends on the account, which only the
	// step knows.
	Cookie func(name string) string
	// OldSession is the session token the browser had, if any.
	OldSession string
}

// maxCodeBytes bounds a code before any work: a recovery code with its
// dashes and some spaces is 19.
const maxCodeBytes = 64

// secondStepOrNone issues a second step for user instead of a session when
// the account has a factor and the browser is not one it remembers; ok
// is false when no step is needed. passwordHash is the account's hash
// after any rehash.
func (s *Service) secondStepOrNone(ctx context.Context, user User, passwordHash, device, source string, mustChange bool) (res LoginResult, ok bool, err error) {
	has, err := s.hasFactors(ctx, user.ID)
	if err != nil || !has {
		return LoginResult{}, err != nil, err
	}
	if device != "" && s.cfg.MFA.RememberFor > 0 {
		// A browser remembered while RememberFor was longer, for longer
		// than it now allows, is asked for a code again: no browser is
		// remembered past RememberFor from now, however long it was when
		// it was ticked. A minute more, so that a replica whose clock is
		// a little behind the one that remembered it still takes it.
		now := s.now()
		remembered, err := s.factors.MFARemembered(ctx, nonceHash(device), now, now.Add(s.cfg.MFA.RememberFor+time.Minute))
		if err != nil {
			return LoginResult{}, true, s.dbDown("reading remembered browser", err)
		}
		if remembered {
			return LoginResult{}, false, nil
		}
	}
	// Stored and recorded whether or not the client waits: a step stored
	// as its client hangs up would otherwise be a right password that no
	// security event shows.
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	token, tokenHash := newToken()
	binding, bindingHash := newToken()
	now := s.now()
	ch := MFAChallenge{TokenHash: tokenHash, BindingHash: bindingHash, UserID: user.ID, PasswordHash: passwordHash,
		MustChange: mustChange, CreatedAt: now, ExpiresAt: now.Add(s.cfg.MFA.ChallengeTTL), SignOuts: user.SignOuts}
	if err := s.factors.AddMFAChallenge(ctx, ch); errors.Is(err, ErrPasswordChanged) {
		// Signed out everywhere since the account was read: refused as
		// a sign-in racing a replaced password is.
		return LoginResult{}, true, ErrInvalidCredentials
	} else if err != nil {
		return LoginResult{}, true, s.dbDown("storing second step", err)
	}
	s.record(Event{Kind: EventMFARequired, Account: user.Email, UserID: user.ID, Source: source})
	return LoginResult{MFA: MFAStep{Token: token, Binding: binding, ExpiresAt: ch.ExpiresAt}}, true, ErrMFARequired
}

// SecondStep finishes a sign-in with a code: a TOTP code of a confirmed
// factor, not of a step used already, or an unused recovery code. It is
// limited per network and per account (see above); a right code signs in
// as the first step would have, the browser made a known device if it
// was not one, and, with Remember, remembered. The step must be live and
// the binding the browser's, and the account's password still the one
// the first step verified.
//
// Errors: ErrInvalidRequest (no code, or too long), ErrInvalidToken (no
// such live step for this browser), *LimitedError (ErrLimited),
// ErrInvalidCode, ErrUnavailable.
func (s *Service) SecondStep(ctx context.Context, req SecondStepRequest) (LoginResult, error) {
	fs, err := s.factorStore()
	if err != nil {
		return LoginResult{}, err
	}
	code := strings.TrimSpace(req.Code)
	if code == "" || len(code) > maxCodeBytes {
		return LoginResult{}, ErrInvalidRequest
	}
	if IsHeldToken(req.Token) {
		return s.heldSecondStep(ctx, fs, req, code)
	}
	if !wellFormedToken(req.Token) || !wellFormedToken(req.Binding) {
		return LoginResult{}, ErrInvalidToken
	}
	source := req.Client.Source()
	if err := s.admitCode(ctx, req.Client, User{}, ownStep, networkCount); err != nil {
		return LoginResult{}, err
	}
	_, user, err := s.liveSecondStep(ctx, req.Token, req.Binding)
	if err != nil {
		return LoginResult{}, err
	}
	if err := s.admitCode(ctx, req.Client, user, ownStep, accountCount); err != nil {
		return LoginResult{}, err
	}
	// Admitted: a code spent is recorded, and its step finished, whether
	// or not the client waits (a recovery code spent as the client hangs
	// up would otherwise go unrecorded).
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	// A recovery code is spent with the step, at once: of right codes
	// racing, those that find the step gone keep theirs.
	var consumed *MFAChallenge
	spend := func(ctx context.Context, userID int64, hash []byte, at time.Time) (bool, error) {
		ch, used, err := fs.UseRecoveryCodeForStep(ctx, userID, hash, hashToken(req.Token), hashToken(req.Binding), at)
		if used {
			consumed = &ch
		}
		return used, err
	}
	kind, err := s.checkCode(ctx, fs, user, false, true, code, source, spend)
	if err != nil {
		return LoginResult{}, err
	}
	// Else the step is spent only now, by a right code: one of two right
	// codes racing finds it gone.
	return s.finishSecondStep(ctx, user, req, kind, consumed)
}

// liveSecondStep reads the second step of token for the browser binding,
// and its account: ErrInvalidToken if the step is gone or expired, or if
// its account is gone or has another password than the one the step's
// first verified. A step that can no longer sign in is refused before
// anything is counted, checked, listed or used for it: a code checked
// would be spent, and a passkey used would sign in alone again.
func (s *Service) liveSecondStep(ctx context.Context, token, binding string) (MFAChallenge, User, error) {
	ch, err := s.factors.MFAChallenge(ctx, hashToken(token), hashToken(binding), s.now())
	if errors.Is(err, ErrInvalidToken) {
		return MFAChallenge{}, User{}, err
	}
	if err != nil {
		return MFAChallenge{}, User{}, s.dbDown("reading second step", err)
	}
	user, err := s.UserByEmail(ctx, ch.Email)
	if errors.Is(err, ErrNoUser) || (err == nil && (user.ID != ch.UserID || user.PasswordHash != ch.PasswordHash)) {
		return MFAChallenge{}, User{}, ErrInvalidToken
	}
	if err != nil {
		return MFAChallenge{}, User{}, err
	}
	return ch, user, nil
}

// codeCounts are the counts admitCode takes.
type codeCounts int

const (
	// networkCount is RuleMFANetwork's, the client network's rate: taken
	// before the step is looked up, so that tokens made up or replayed
	// cost no query past it.
	networkCount codeCounts = 1 << iota
	// accountCount is RuleMFAAccount's, towards the lock of the account,
	// once it is known.
	accountCount
	bothCounts = networkCount | accountCount
)

// codeOf is whose second step a code is tried at, which says what lock
// it counts towards.
type codeOf int

const (
	// ownStep: the account's own, after its password; its lock is the
	// account's.
	ownStep codeOf = iota
	// heldAnswer: a held answer's, which anyone gets without the password
	// (heldAccount).
	heldAnswer
	// passwordless: a passkey alone, which anyone may try naming any
	// credential id (passwordlessAccount).
	passwordless
)

// admitCode counts a code about to be checked by the client network's
// rate, then towards the lock of the account (for a held token's code,
// of heldAccount's of its address; for a passkey alone, of
// passwordlessAccount's), as far as counts asks, and refuses it if the
// rate is spent or the account was locked already. The count comes first,
// so that concurrent codes are checked at most the limit's number of times
// per window and the threshold's per lock.
func (s *Service) admitCode(ctx context.Context, c Client, user User, of codeOf, counts codeCounts) error {
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	account, held := user.Email, of == heldAnswer
	switch of {
	case heldAnswer:
		account = heldAccount(user.Email)
	case passwordless:
		account = passwordlessAccount(user.Email)
	}
	source := c.Source()
	rules := s.rules(FlowSecondStep, Subject{Client: c, Account: account})
	if counts&networkCount != 0 {
		// The network's rungs (RuleMFANetwork, RuleMFASite): admitted and
		// counted in one decision, so that a code one rung refuses spends
		// no other's count.
		d, err := s.decide(ctx, networkRules(rules)...)
		if err != nil {
			return unavailable("counting second-step attempt", err)
		}
		if !d.Allowed {
			s.record(codeEvent(EventMFARejected, user, source, held, map[string]string{}, rejectingRule(d)))
			return &LimitedError{RetryAfter: d.RetryAfter}
		}
	}
	for _, r := range rules {
		if !r.Lockable || counts&accountCount == 0 {
			continue
		}
		f, err := s.limits.Fail(ctx, r.Name, r.ID, "")
		if err != nil {
			return unavailable("counting second-step attempt", err)
		}
		if f.Failures == 0 {
			// Locked already: this code is not checked.
			s.record(codeEvent(EventMFARejected, user, source, held, map[string]string{}, r.Name))
			return &LimitedError{RetryAfter: max(f.LockedFor, time.Second)}
		}
		if f.LockedNow {
			if held {
				s.recordHeldLockout(ctx, account, user, held, f)
			} else {
				s.recordSecondStepLockout(ctx, account, user, held, f)
			}
			s.record(codeEvent(EventMFALockout, user, source, held, map[string]string{"level": strconv.Itoa(f.Level),
				"until": s.now().Add(f.LockedFor).UTC().Format(time.RFC3339)}, r.Name))
		}
	}
	return nil
}

// codeEvent is the event of a code tried at a second step. A held
// token's (mfa_held.go) is the address's, not the account's: anyone gets
// one without the password, so its codes stay out of the owner's
// activity (which lists events by account id), and Detail held=true
// tells them apart in the security log.
func codeEvent(kind string, user User, source string, held bool, detail map[string]string, rule string) Event {
	e := Event{Kind: kind, Account: user.Email, UserID: user.ID, Source: source, Rule: rule}
	if held {
		e.UserID = 0
		detail["held"] = "true"
	}
	if len(detail) > 0 {
		e.Detail = detail
	}
	return e
}

// EventMFALockout: the second step of an account (or of a held answer's
// address) was locked by a code counted at its threshold; Rule says
// which.
const EventMFALockout = "mfa_lockout"

// spendRecovery spends the unused recovery code with hash of the account
// userID and reports whether there was one (FactorStore.UseRecoveryCode,
// or UseRecoveryCodeForStep with its step).
type spendRecovery func(ctx context.Context, userID int64, hash []byte, at time.Time) (bool, error)

// checkCode checks code against the account's confirmed TOTP factors, or
// as a recovery code, and spends it (a recovery code with spend). It
// returns "totp" or "recovery"; ErrInvalidCode, recorded, when it is
// neither or was used already; spend's ErrInvalidToken as it is.
//
// Not usable (a held step whose password was not right: mfa_held.go), it
// does the same work but accepts and spends nothing: a right TOTP code
// counts as wrong and its step stays unused, and a recovery code is
// looked for under no account.
func (s *Service) checkCode(ctx context.Context, fs FactorStore, user User, held, usable bool, code, source string, spend spendRecovery) (string, error) {
	now := s.now()
	failed := func(detail map[string]string) error {
		s.record(codeEvent(EventMFAFailed, user, source, held, detail, ""))
		return ErrInvalidCode
	}
	if digits := strings.ReplaceAll(code, " ", ""); isTOTPCode(digits) {
		factors, err := fs.Factors(ctx, user.ID)
		if err != nil {
			return "", s.dbDown("reading second factors", err)
		}
		reused, checked := false, false
		// A secret this key cannot open (sealed under another
		// XCLOAK_MFA_KEY) leaves the account's other apps working; the
		// code is refused as unchecked (503) only if no other took it.
		var unopened error
		for _, f := range factors {
			if f.Kind != FactorTOTP || f.ConfirmedAt.IsZero() {
				continue
			}
			checked = true
			secret, err := openSecret(s.cfg.MFA.Key, user.ID, f.Secret)
			if err != nil {
				s.log.ErrorContext(ctx, "TOTP factor not opened", "factor", f.ID, "err", err)
				unopened = fmt.Errorf("%w: reading TOTP factor %d: %w", ErrUnavailable, f.ID, err)
				continue
			}
			step, ok := matchTOTP(secret, digits, now)
			if !ok || !usable {
				continue
			}
			used, err := fs.UseTOTPStep(ctx, f.ID, step, now)
			if err != nil {
				return "", s.dbDown("recording TOTP step", err)
			}
			if used {
				return "totp", nil
			}
			reused = true
		}
		if !checked {
			// An account without an authenticator app, or none, costs
			// what one with an app does: a held step's code must not
			// tell which accounts have one (mfa_held.go).
			matchTOTP(noTOTPSecret[:], digits, now)
		}
		if unopened != nil {
			// Before reused, which only a usable step can be: a held
			// step's answer must not tell by it whether its password
			// was right. Recorded as unchecked, so that guesses at such
			// an account still show.
			failed(map[string]string{"unchecked": "true"})
			return "", unopened
		}
		if reused {
			return "", failed(map[string]string{"reused": "true"})
		}
		return "", failed(map[string]string{})
	}
	if rc, ok := normaliseRecoveryCode(code); ok {
		owner := user.ID
		if !usable {
			owner = 0
		}
		used, err := spend(ctx, owner, recoveryHash(rc), now)
		if errors.Is(err, ErrInvalidToken) {
			return "", err
		}
		if err != nil {
			return "", s.dbDown("spending recovery code", err)
		}
		if used {
			left, err := fs.RecoveryCodesLeft(ctx, user.ID)
			if err != nil {
				s.log.WarnContext(ctx, "counting recovery codes", "err", err)
			}
			s.record(Event{Kind: EventRecoveryCodeUsed, Account: user.Email, UserID: user.ID, Source: source,
				Detail: map[string]string{"left": strconv.Itoa(left)}})
			return "recovery", nil
		}
	}
	return "", failed(map[string]string{})
}

// noTOTPSecret is the secret checkCode checks a code against when the
// account has no TOTP factor: a code matches it no more than any other,
// and nothing is accepted for it.
var noTOTPSecret [totpSecretLen]byte

// finishSecondStep signs in the account of a second step answered right,
// whatever answered it (a code in SecondStep, a passkey here): the
// account's second-step failures cleared, the step spent (one of two right
// answers racing finds it gone), the session made if the password is
// still the one the first step verified, and the browser remembered if
// asked. consumed is the step if its answer spent it already (a recovery
// code, UseRecoveryCodeForStep), else nil.
func (s *Service) finishSecondStep(ctx context.Context, user User, req SecondStepRequest, kind string, consumed *MFAChallenge) (LoginResult, error) {
	fs := s.factors
	s.clearSecondStepFailures(ctx, user.Email)
	if consumed == nil {
		ch, err := fs.ConsumeMFAChallenge(ctx, hashToken(req.Token), hashToken(req.Binding), s.now())
		if errors.Is(err, ErrInvalidToken) {
			return LoginResult{}, err
		}
		if err != nil {
			return LoginResult{}, s.dbDown("spending second step", err)
		}
		consumed = &ch
	}
	ch := *consumed
	if ch.PasswordHash != user.PasswordHash {
		return LoginResult{}, ErrInvalidToken
	}
	return s.stepSignedIn(ctx, user, req, kind, ch.PasswordHash, ch.MustChange)
}

// clearSecondStepFailures clears the second-step failures counted as
// id (admitCode: the account's address, or heldAccount's) after a right
// answer.
func (s *Service) clearSecondStepFailures(ctx context.Context, id string) {
	after, cancel := s.afterDecision(ctx)
	defer cancel()
	s.clearSecondStepLock(after, id)
}

// clearSecondStepLock clears the second-step failures and lock counted as
// id after a right answer. A lock it lifts (taken by this answer's own
// count, as admitCode counts a code before checking it; or, after a
// passkey alone, the owner's own step's) is no longer in force: its row
// in the lockout log (recordSecondStepLockout) ends with it, by
// lockoutLiftedBySuccess, so that the dashboard does not list it.
func (s *Service) clearSecondStepLock(ctx context.Context, id string) {
	locked, err := s.limits.Clear(ctx, RuleMFAAccount, id)
	if err != nil {
		s.log.WarnContext(ctx, "clearing second-step failures after sign-in", "err", err)
		return
	}
	if locked {
		// After the row's own write, which a held token's code detaches
		// (recordHeldLockout); before any later lock's, which waits for
		// it (recordSecondStepLockout, or detached after it).
		key := secondStepLockKey(id)
		s.detach(ctx, key, func(ctx context.Context) { s.clearLockoutRows(ctx, lockoutLiftedBySuccess, key) })
	}
}

// lockoutLiftedBySuccess is who ended a second step's lock that the right
// answer counted at its threshold lifted, as the lockout log records it.
const lockoutLiftedBySuccess = "success"

// stepSignedIn makes the session of a second step spent, while the
// account's password hash is still passwordHash, and remembers the
// browser if asked.
func (s *Service) stepSignedIn(ctx context.Context, user User, req SecondStepRequest, kind, passwordHash string, mustChange bool) (LoginResult, error) {
	fs := s.factors
	device, cookie := s.knownDeviceOf(ctx, user.Email, req.Cookie)
	lreq := LoginRequest{Email: user.Email, Client: req.Client, DeviceCookie: cookie, OldSession: req.OldSession}
	res, err := s.signedIn(ctx, lreq, user, passwordHash, req.Client.Source(), device, mustChange, kind)
	if errors.Is(err, ErrInvalidCredentials) {
		return LoginResult{}, ErrInvalidToken
	}
	if err != nil {
		return LoginResult{}, err
	}
	if req.Remember && s.cfg.MFA.RememberFor > 0 {
		if nonce, ok := s.devices.Check(user.Email, res.Device.Value); ok {
			if err := fs.RememberMFA(ctx, user.ID, nonceHash(nonce), s.now().Add(s.cfg.MFA.RememberFor),
				Verified{PasswordHash: passwordHash, SignOuts: user.SignOuts}); err != nil {
				s.metrics.dbErrors.Inc()
				s.log.WarnContext(ctx, "remembering browser for the second step", "err", err)
			}
		}
	}
	return res, nil
}

// knownDeviceOf returns the nonce of the account's known device the
// browser's cookie names ("" for none) and the cookie's value.
func (s *Service) knownDeviceOf(ctx context.Context, email string, read func(string) string) (device, cookie string) {
	if read == nil {
		return "", ""
	}
	cookie = read(s.devices.CookieName(email))
	if nonce, ok := s.devices.Check(email, cookie); ok {
		if known, err := s.knownDevice(ctx, email, nonce); err == nil && known {
			return nonce, cookie
		}
	}
	return "", cookie
}
