package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/xcloak/xcloak/ratelimit"
)

// Signing in with a passkey, in two ways.
//
// As the second step (BeginSecondStepPasskey, SecondStepPasskey): after
// the right password, an account with a passkey may answer its second
// step with one instead of a code. The assertion is counted by the second
// step's limits (RuleMFANetwork, RuleMFAAccount) before it is verified, as
// a code is, and a right one finishes the step as a right code does.
//
// Alone (BeginPasskeySignIn, PasskeySignIn): a discoverable credential
// names its account, so no email or password is typed. The assertion is
// counted by the same two rules, before its signature is verified: by the
// network's first, and by the account's once its credential names one; an
// unknown credential counts by the network's only and is answered as a
// wrong signature is, so nothing tells the two apart beyond what WebAuthn
// itself does (the browser offers only credentials it holds). Alone it
// must have verified its user (a PIN, a fingerprint): a passkey that did
// proves possession of the device and the user's presence at it, and is
// bound to XCloak's origin, so it cannot be phished: it signs in a browser that is not a known device
// without the mailed link, in attack mode too (verification.go holds
// passwords, not passkeys).
//
// Either way an assertion whose signature counter goes back is refused
// and recorded (EventPasskeyCloned), and one ceremony is answered once.

// BeginSecondStepPasskey begins a passkey assertion for the live second
// step token of the browser binding (the second step's cookie), allowing
// the account's passkeys, from client c: counted first, as a passwordless
// sign-in begun is (RulePasskeyOptionsIP), before the token is looked up.
// Errors: *LimitedError, ErrInvalidToken, ErrNoFactor (the account has no
// passkey), ErrUnavailable.
func (s *Service) BeginSecondStepPasskey(ctx context.Context, token, binding string, c Client) (PasskeyCeremony, error) {
	ps, err := s.passkeyStore()
	if err != nil {
		return PasskeyCeremony{}, err
	}
	if err := s.admitClient(ctx, FlowPasskeyBegin, c, EventMFARejected); err != nil {
		return PasskeyCeremony{}, err
	}
	if !wellFormedToken(token) || !wellFormedToken(binding) {
		return PasskeyCeremony{}, ErrInvalidToken
	}
	ch, _, err := s.liveSecondStep(ctx, token, binding)
	if err != nil {
		return PasskeyCeremony{}, err
	}
	keys, err := ps.Passkeys(ctx, ch.UserID)
	if err != nil {
		return PasskeyCeremony{}, s.dbDown("reading passkeys", err)
	}
	if len(keys) == 0 {
		return PasskeyCeremony{}, ErrNoFactor
	}
	assertion, data, err := s.webauthn.BeginLogin(passkeyUser{handle: keys[0].Handle, email: ch.Email, keys: keys})
	if err != nil {
		return PasskeyCeremony{}, fmt.Errorf("%w: beginning passkey assertion: %w", ErrUnavailable, err)
	}
	ceremony, err := s.startCeremony(ctx, ps, Ceremony{Purpose: ceremonySecondStep, UserID: ch.UserID, MFATokenHash: hashToken(token)}, data, assertion)
	if errors.Is(err, ErrNoUser) {
		// Deleted meanwhile, and its second step with it.
		return PasskeyCeremony{}, ErrInvalidToken
	}
	return ceremony, err
}

// PasskeyStepRequest finishes a second step with a passkey.
type PasskeyStepRequest struct {
	// Token is the mfa_token, Binding the second step's cookie.
	Token, Binding string
	// Ceremony is the value of the passkey ceremony's cookie.
	Ceremony string
	// Response is the browser's PublicKeyCredential, as JSON.
	Response []byte
	// Remember, Client, Cookie and OldSession are as SecondStepRequest's.
	Remember   bool
	Client     Client
	Cookie     func(name string) string
	OldSession string
}

// SecondStepPasskey finishes a second step with a passkey assertion, as
// SecondStep does with a code. Errors: ErrInvalidRequest, ErrInvalidToken,
// *LimitedError, ErrInvalidPasskey, ErrUnavailable.
func (s *Service) SecondStepPasskey(ctx context.Context, req PasskeyStepRequest) (LoginResult, error) {
	ps, err := s.passkeyStore()
	if err != nil {
		return LoginResult{}, err
	}
	if len(req.Response) == 0 || len(req.Response) > MaxPasskeyResponseBytes {
		return LoginResult{}, ErrInvalidRequest
	}
	if !wellFormedToken(req.Token) || !wellFormedToken(req.Binding) {
		return LoginResult{}, ErrInvalidToken
	}
	if err := s.admitCode(ctx, req.Client, User{}, ownStep, networkCount); err != nil {
		return LoginResult{}, err
	}
	ch, user, err := s.liveSecondStep(ctx, req.Token, req.Binding)
	if err != nil {
		return LoginResult{}, err
	}
	if err := s.admitCode(ctx, req.Client, user, ownStep, accountCount); err != nil {
		return LoginResult{}, err
	}
	// Admitted: the ceremony and the passkey's counter spent are followed
	// by the step's end and its sign-in whether or not the client waits,
	// as in SecondStep.
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	source := req.Client.Source()
	c, data, err := s.takeCeremony(ctx, ps, req.Ceremony, ceremonySecondStep)
	if errors.Is(err, ErrInvalidToken) || (err == nil && (c.UserID != user.ID || !bytes.Equal(c.MFATokenHash, hashToken(req.Token)))) {
		return LoginResult{}, s.passkeyFailed(user, source, "no ceremony")
	}
	if err != nil {
		return LoginResult{}, err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(req.Response)
	if err != nil {
		return LoginResult{}, s.passkeyFailed(user, source, "malformed")
	}
	pu, err := s.passkeyUser(ctx, ps, user.ID, user.Email)
	if errors.Is(err, ErrNoUser) {
		// Deleted meanwhile, and its second step with it.
		return LoginResult{}, ErrInvalidToken
	}
	if err != nil {
		return LoginResult{}, err
	}
	cred, err := s.webauthn.ValidateLogin(pu, data, parsed)
	if err != nil {
		return LoginResult{}, s.passkeyFailed(user, source, "not verified")
	}
	if err := s.usePasskey(ctx, ps, user, source, pu.keys, cred, ch.PasswordHash); err != nil {
		return LoginResult{}, err
	}
	return s.finishSecondStep(ctx, user, SecondStepRequest{Token: req.Token, Binding: req.Binding, Remember: req.Remember,
		Client: req.Client, Cookie: req.Cookie, OldSession: req.OldSession}, "webauthn", nil)
}

// BeginPasskeySignIn begins a passwordless sign-in: an assertion of any
// discoverable credential, limited per client network
// (RulePasskeyOptionsIP). User verification is required: a passkey alone
// must be two factors, the key held and the PIN or fingerprint that
// unlocks it; a key that only tests presence (a security key without a
// PIN) is one, and serves only as the second step after the password,
// where verification stays preferred. Errors: *LimitedError,
// ErrUnavailable.
func (s *Service) BeginPasskeySignIn(ctx context.Context, client Client) (PasskeyCeremony, error) {
	ps, err := s.passkeyStore()
	if err != nil {
		return PasskeyCeremony{}, err
	}
	d, err := s.decide(ctx, s.rules(FlowPasskeyBegin, Subject{Client: client})...)
	if err != nil {
		return PasskeyCeremony{}, unavailable("checking limits", err)
	}
	if !d.Allowed {
		s.record(Event{Kind: EventLoginRejected, Source: client.Source(), Rule: rejectingRule(d)})
		return PasskeyCeremony{}, &LimitedError{RetryAfter: d.RetryAfter}
	}
	assertion, data, err := s.webauthn.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return PasskeyCeremony{}, fmt.Errorf("%w: beginning passkey sign-in: %w", ErrUnavailable, err)
	}
	return s.startCeremony(ctx, ps, Ceremony{Purpose: ceremonyPasskey}, data, assertion)
}

// PasskeySignInRequest is a passwordless sign-in.
type PasskeySignInRequest struct {
	// Ceremony is the value of the passkey ceremony's cookie.
	Ceremony string
	// Response is the browser's PublicKeyCredential, as JSON.
	Response   []byte
	Client     Client
	Cookie     func(name string) string
	OldSession string
}

// PasskeySignIn signs in with a discoverable credential alone. Errors:
// ErrInvalidRequest, ErrInvalidToken (no live ceremony of this browser's),
// *LimitedError, ErrInvalidPasskey (malformed, unknown, not verified, a
// counter gone back, or a disabled account), ErrUnavailable.
func (s *Service) PasskeySignIn(ctx context.Context, req PasskeySignInRequest) (LoginResult, error) {
	res, account, outcome, err := s.passkeySignIn(ctx, req)
	s.attack.Observe(SignInAttempt{At: s.now(), Account: account, Client: req.Client, Outcome: outcome})
	return res, err
}

func (s *Service) passkeySignIn(ctx context.Context, req PasskeySignInRequest) (LoginResult, string, Outcome, error) {
	ps, err := s.passkeyStore()
	if err != nil {
		return LoginResult{}, "", OutcomeUnavailable, err
	}
	if len(req.Response) == 0 || len(req.Response) > MaxPasskeyResponseBytes {
		return LoginResult{}, "", OutcomeInvalid, ErrInvalidRequest
	}
	source := req.Client.Source()
	// The network's count comes before the ceremony is looked up, so that
	// ceremonies made up or replayed cost no query past it.
	if err := s.admitNetwork(ctx, req.Client); err != nil {
		return LoginResult{}, "", OutcomeRejected, err
	}
	_, data, err := s.takeCeremony(ctx, ps, req.Ceremony, ceremonyPasskey)
	if err != nil {
		return LoginResult{}, "", OutcomeInvalid, err
	}
	parsed, perr := protocol.ParseCredentialRequestResponseBytes(req.Response)
	var key Passkey
	if perr == nil {
		key, err = ps.PasskeyByCredential(ctx, parsed.RawID)
	}
	if perr != nil || errors.Is(err, ErrNoFactor) {
		// Counted by the network's rule alone: there is no account.
		s.record(Event{Kind: EventMFAFailed, Source: source, Detail: map[string]string{"kind": string(FactorWebAuthn), "passwordless": "true"}})
		return LoginResult{}, "", OutcomeFailed, ErrInvalidPasskey
	}
	if err != nil {
		return LoginResult{}, "", OutcomeUnavailable, s.dbDown("reading passkey", err)
	}
	user, err := s.UserByEmail(ctx, key.Email)
	if errors.Is(err, ErrNoUser) {
		return LoginResult{}, "", OutcomeFailed, ErrInvalidPasskey
	}
	if err != nil {
		return LoginResult{}, "", OutcomeUnavailable, err
	}
	// Counted apart from the account's own second step: anyone may name
	// a credential id seen once (a second step's allowCredentials), and
	// must not lock its owner's codes and passkeys after the password.
	if err := s.admitCode(ctx, req.Client, user, passwordless, accountCount); err != nil {
		return LoginResult{}, user.Email, OutcomeRejected, err
	}
	// Admitted: the passkey's counter spent is followed by its sign-in
	// whether or not the client waits, as in SecondStepPasskey. The
	// ceremony is spent already, and a hang-up as the counter commits
	// would otherwise leave it moved on with no session and nothing
	// recorded but a failure.
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	keys, err := ps.Passkeys(ctx, user.ID)
	if err != nil {
		return LoginResult{}, user.Email, OutcomeUnavailable, s.dbDown("reading passkeys", err)
	}
	pu := passkeyUser{handle: key.Handle, email: user.Email, keys: keys}
	_, cred, err := s.webauthn.ValidatePasskeyLogin(func(rawID, userHandle []byte) (webauthn.User, error) {
		if !bytes.Equal(userHandle, pu.handle) {
			return nil, errors.New("user handle is not the credential's account's")
		}
		return pu, nil
	}, data, parsed)
	// A disabled account's passkey is answered as a wrong one, after the
	// same work. The library checks the user-verified flag because the
	// ceremony required it; checked again here, so that no change of the
	// ceremony's options can let an unverified answer sign in alone.
	if err != nil || !parsed.Response.AuthenticatorData.Flags.HasUserVerified() || user.Disabled() {
		return LoginResult{}, user.Email, OutcomeFailed, s.passkeyFailed(user, source, "not verified")
	}
	// Verified, but stopped by a new password until it serves after it
	// (Passkey.SignsInAlone). Said as such: only the key's holder gets
	// this far, and its owner needs to know to type the password. Judged
	// as keys, read after the account, have it: a new password committed
	// after key was read but before the account was would otherwise let
	// the key sign in under it.
	if !signsInAlone(keys, cred.ID) {
		s.passkeyFailed(user, source, "password replaced")
		return LoginResult{}, user.Email, OutcomeFailed, ErrPasskeyNeedsPassword
	}
	if err := s.usePasskey(ctx, ps, user, source, keys, cred, ""); err != nil {
		return LoginResult{}, user.Email, OutcomeFailed, err
	}
	for _, id := range []string{passwordlessAccount(user.Email), user.Email} {
		s.clearSecondStepLock(ctx, id)
	}
	// Counted once verified (its counter stored, its failures cleared), so
	// that only the passkey's holder spends it, and spending it is no
	// failure of the passkey's.
	if d, err := s.decide(ctx, s.rules(FlowPasskeySignIn, Subject{Client: req.Client, Account: user.Email})...); err != nil {
		return LoginResult{}, user.Email, OutcomeUnavailable, unavailable("counting passkey sign-in", err)
	} else if !d.Allowed {
		s.record(Event{Kind: EventMFARejected, Account: user.Email, UserID: user.ID, Source: source, Rule: rejectingRule(d)})
		return LoginResult{}, user.Email, OutcomeRejected, &LimitedError{RetryAfter: d.RetryAfter}
	}
	device, cookie := s.knownDeviceOf(ctx, user.Email, req.Cookie)
	lreq := LoginRequest{Email: user.Email, Client: req.Client, DeviceCookie: cookie, OldSession: req.OldSession}
	res, err := s.signedIn(ctx, lreq, user, user.PasswordHash, source, device, false, "passkey")
	if errors.Is(err, ErrInvalidCredentials) {
		// The password was replaced meanwhile, ending every session:
		// start again.
		return LoginResult{}, user.Email, OutcomeUnavailable, ErrInvalidToken
	}
	if err != nil {
		return LoginResult{}, user.Email, OutcomeUnavailable, err
	}
	return res, user.Email, OutcomeSucceeded, nil
}

// signsInAlone reports whether the passkey of credential id among keys
// may sign in without the password.
func signsInAlone(keys []Passkey, id []byte) bool {
	for _, k := range keys {
		if bytes.Equal(k.CredentialID, id) {
			return k.SignsInAlone
		}
	}
	return false
}

// admitNetwork counts an attempt by the second step's rates of the
// client's network alone (its rungs, in one decision), and refuses it if
// one is spent.
func (s *Service) admitNetwork(ctx context.Context, c Client) error {
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	d, err := s.decide(ctx, networkRules(s.rules(FlowSecondStep, Subject{Client: c}))...)
	if err != nil {
		return unavailable("counting passkey attempt", err)
	}
	if !d.Allowed {
		s.record(Event{Kind: EventMFARejected, Source: c.Source(), Rule: rejectingRule(d)})
		return &LimitedError{RetryAfter: d.RetryAfter}
	}
	return nil
}

// networkRules keeps the second step's rules that are rates of the
// client's network (RuleMFANetwork, RuleMFASite), leaving out the
// account's lock, in a slice of their own: rules is left as it was.
func networkRules(rules []ratelimit.Rule) []ratelimit.Rule {
	out := make([]ratelimit.Rule, 0, len(rules))
	for _, r := range rules {
		if !r.Lockable {
			out = append(out, r)
		}
	}
	return out
}

// passkeyFailed records an assertion refused and returns ErrInvalidPasskey.
func (s *Service) passkeyFailed(user User, source, why string) error {
	s.record(Event{Kind: EventMFAFailed, Account: user.Email, UserID: user.ID, Source: source,
		Detail: map[string]string{"kind": string(FactorWebAuthn), "reason": why}})
	return ErrInvalidPasskey
}

// usePasskey records the verified assertion cred of one of keys: its
// counter, and, for a second step, whose first verified the password
// hash password, that it signs in alone again if that is still the
// account's password (PasskeyStore.UsePasskey). One whose counter went
// back is refused and recorded.
func (s *Service) usePasskey(ctx context.Context, ps PasskeyStore, user User, source string, keys []Passkey, cred *webauthn.Credential, password string) error {
	for _, k := range keys {
		if !bytes.Equal(k.CredentialID, cred.ID) {
			continue
		}
		ok, err := ps.UsePasskey(ctx, k.ID, cred.Authenticator.SignCount, cred.Flags.BackupState, password, s.now())
		if err != nil {
			return s.dbDown("recording passkey counter", err)
		}
		if !ok {
			s.record(Event{Kind: EventPasskeyCloned, Account: user.Email, UserID: user.ID, Source: source,
				Detail: map[string]string{"factor": fmt.Sprint(k.ID)}})
			return ErrInvalidPasskey
		}
		return nil
	}
	return s.passkeyFailed(user, source, "unknown credential")
}
