package auth

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// New-device verification. While it applies (Config.NewDeviceVerification:
// always, never, or while the attack watch says the deployment is under
// attack), a sign-in from a browser that is not a known device of the
// account never gets a session, even with the right password. The right
// password, a wrong one and an unknown account all get the one answer,
// ErrVerificationRequired, after the same hashing, so a credential
// stuffing run learns nothing from it, not even which passwords are right.
// Wrong guesses still count towards every limit, lockout and spraying
// count as they always do.
//
// A held right password is counted towards the account's lockout and the
// password's spraying lock as a wrong one is (hold says why), and only for
// it is a mail queued (the link-mail queue of resets.go, off the request
// path). It carries a single-use link,
// random, stored hashed, short-lived and bound to the password hash of the
// moment, which signs in the browser that opens it and makes it a known
// device: never the browser that asked, so an owner who clicks cannot let
// an attacker in. The mail also tells the owner that if the sign-in was
// not theirs, their password is known to someone, with a reset link.
//
// A right password that is breached (passwordBreached) never signs in an
// unknown browser either: it is held with the same answer, and its mail
// asks the owner to choose a new password, with no sign-in link. When
// verification applies anyway, the lookup is made by the mail's job,
// not on the request path.

// VerificationMode says when new-device verification applies.
type VerificationMode string

// The modes of new-device verification.
const (
	// VerifyInAttack: while the attack watch says the deployment is under
	// attack (the default).
	VerifyInAttack VerificationMode = "attack"
	// VerifyAlways: for every sign-in from a browser that is not a known
	// device.
	VerifyAlways VerificationMode = "always"
	// VerifyNever: never; breached passwords are still held, and so
	// are passwords whose breach lookup failed (breached.go).
	VerifyNever VerificationMode = "never"
)

// ParseVerificationMode parses attack, always or never.
func ParseVerificationMode(s string) (VerificationMode, error) {
	switch m := VerificationMode(s); m {
	case VerifyInAttack, VerifyAlways, VerifyNever:
		return m, nil
	}
	return "", fmt.Errorf("%q is not attack, always or never", s)
}

// DefaultVerificationTTL is how long a link that finishes a held sign-in
// works unless Config.VerificationTTL says otherwise: long enough to
// fetch one's mail, short enough that a link found in a mailbox later is
// dead.
const DefaultVerificationTTL = 15 * time.Minute

// checkVerification checks the verification settings, and makes an empty
// mode the default.
func checkVerification(cfg *Config) error {
	if cfg.NewDeviceVerification == "" {
		cfg.NewDeviceVerification = VerifyInAttack
	}
	if _, err := ParseVerificationMode(string(cfg.NewDeviceVerification)); err != nil {
		return fmt.Errorf("new-device verification: %w", err)
	}
	if cfg.VerificationTTL <= 0 {
		return errors.New("sign-in link lifetime must be positive")
	}
	return nil
}

// New-device verification events.
const (
	// EventVerificationRequired: the right password from a browser that
	// is not a known device, held; a link was queued for the account.
	// Detail "breached" is "true" when the password was known to be
	// breached. Wrong passwords and unknown accounts held alike are
	// login_failed events, as always: only the events say which was
	// which, never the answer.
	EventVerificationRequired = "verification_required"
	// EventVerificationConfirmed: a sign-in link was used; the browser
	// that used it is signed in and a known device.
	EventVerificationConfirmed = "verification_confirmed"
	// EventVerificationRejected: a sign-in link's confirmation refused by
	// a limit; Rule says which.
	EventVerificationRejected = "verification_rejected"
)

// verificationApplies reports whether a sign-in from a browser that is
// not a known device is held now.
func (s *Service) verificationApplies() bool {
	switch s.cfg.NewDeviceVerification {
	case VerifyAlways:
		return true
	case VerifyNever:
		return false
	default:
		return s.attack.Active()
	}
}

// heldSignIn is what the mail job of a held sign-in needs.
type heldSignIn struct {
	userID int64
	// passwordHash is the hash the sign-in verified, signOuts the
	// account's User.SignOuts it read; the link is bound to both, and no
	// mail is sent if the password was replaced or the account signed out
	// everywhere meanwhile.
	passwordHash string
	signOuts     int64
	// breached: the password is known to be breached.
	breached bool
	// password is set only when the job must look it up in the breached
	// corpus itself; it lives in memory until the job runs, never in a
	// store or a log.
	password string
	// step is the held answer's second step (mfa_held.go), which the job
	// spends when it finds the password breached.
	step *heldStep
}

// failedOrHeld counts a failed sign-in (wrong password, unknown account
// as User{Email}, disabled account) as failed does. Held, its answer is
// the right password's, ErrVerificationRequired with a second step that
// no code finishes (mfa_held.go), whatever counting returned: a failure
// that could not be counted is logged, and the answer does not tell it
// apart.
func (s *Service) failedOrHeld(ctx context.Context, held bool, user User, source, device, password string) (LoginResult, error) {
	err := s.failed(ctx, user.Email, user.ID, source, device, password)
	if !held {
		return LoginResult{}, err
	}
	if !errors.Is(err, ErrInvalidCredentials) {
		s.log.WarnContext(ctx, "held sign-in: failure not counted", "err", err)
	}
	res, _ := s.heldAnswer(user, false)
	return res, ErrVerificationRequired
}

// hold holds the right password of user from a browser that is not a
// known device: it records the event, counts the attempt as a wrong
// password's is counted, queues the mail and returns
// ErrVerificationRequired with the held answer's second step, which the
// factor's code may finish unless the password is breached (mfa_held.go).
// With lookUp, the mail's job looks the password up in the breached
// corpus, and spends the step if it is; otherwise breached says what is
// known.
//
// The count is what keeps the answer from telling: were a held right
// password not counted, an account that failed to lock after its
// threshold of held tries, or a password that failed to spray-lock after
// its accounts, would say that one of them was right; and the request
// would come back sooner by the failure count's round trips. Counted, it
// costs the same and weighs the same; a retyped right password counts
// once, as a retyped wrong one does. The mail is queued after, so that
// its work does not compete with the request's own.
func (s *Service) hold(ctx context.Context, user User, source, password string, breached, lookUp bool) (LoginResult, error) {
	res, step := s.heldAnswer(user, !breached)
	job := &heldSignIn{userID: user.ID, passwordHash: user.PasswordHash, signOuts: user.SignOuts, breached: breached, step: step}
	if lookUp {
		job.password = password
	}
	e := Event{Kind: EventVerificationRequired, Account: user.Email, UserID: user.ID, Source: source}
	if breached {
		e.Detail = map[string]string{"breached": "true"}
	}
	s.record(e)
	at := s.now()
	if err := s.countFailed(ctx, user.Email, user.ID, source, "", password); !errors.Is(err, ErrInvalidCredentials) {
		s.log.WarnContext(ctx, "held sign-in: attempt not counted", "err", err)
	}
	s.queueLink(linkJob{email: user.Email, source: source, at: at, signIn: job})
	return res, ErrVerificationRequired
}

// signInMail stores a new sign-in token for user, bound to the held
// sign-in's password hash, and a reset token, and returns the mail that
// carries their links. A breached password gets no sign-in link: the mail
// asks for a new password instead.
func (s *Service) signInMail(ctx context.Context, user User, job linkJob) (Message, error) {
	held := job.signIn
	breached := held.breached || (held.password != "" && s.passwordBreached(ctx, held.password))
	reset, err := s.resetURL(ctx, user)
	if err != nil {
		return Message{}, err
	}
	if breached {
		s.spendBreachedHeld(ctx, user, held.step)
		return Message{
			To:      user.Email,
			Subject: "Choose a new XCloak password",
			Body: fmt.Sprintf("Someone signed in to the XCloak account for %s with its password,\n"+
				"from a browser that has not signed in to it before.\n\n"+
				"That password appears in a list of passwords leaked from other sites,\n"+
				"so it cannot sign in a new browser. Choose a new one here, within %s:\n\n%s\n\n"+
				"If this was not you, someone knows your password: choose a new one all\n"+
				"the same.\n",
				user.Email, LinkLife(s.cfg.ResetTTL), reset),
		}, nil
	}
	token, hash := newToken()
	now := s.linkMade()
	err = s.store.AddSignInToken(ctx, hash, user.ID, held.passwordHash, held.signOuts, now, now.Add(s.cfg.VerificationTTL))
	if errors.Is(err, ErrPasswordChanged) {
		// Signed out everywhere (or the password replaced) since the
		// sign-in was held: it cannot be finished, but whoever holds
		// the password must still be told.
		return Message{
			To:      user.Email,
			Subject: "Someone signed in to your XCloak account",
			Body: fmt.Sprintf("Someone signed in to the XCloak account for %s with its password,\n"+
				"from a browser that has not signed in to it before.\n\n"+
				"Every browser of the account was signed out since, so that sign-in\n"+
				"cannot be finished: if it was you, sign in again.\n\n"+
				"If this was not you, your password is known to someone. Choose a new\n"+
				"one here, within %s:\n\n%s\n",
				user.Email, LinkLife(s.cfg.ResetTTL), reset),
		}, nil
	}
	if err != nil {
		return Message{}, err
	}
	link := s.cfg.PublicURL.JoinPath("sign-in", token).String()
	return Message{
		To:      user.Email,
		Subject: "Finish signing in to XCloak",
		Body: fmt.Sprintf("Someone signed in to the XCloak account for %s with its password,\n"+
			"from a browser that has not signed in to it before.\n\n"+
			"If it was you, open this link within %s in the browser you want to\n"+
			"sign in with, and press the button. It works once.\n\n%s\n\n"+
			"If this was not you, your password is known to someone. Choose a new\n"+
			"one here, within %s:\n\n%s\n",
			user.Email, LinkLife(s.cfg.VerificationTTL), link, LinkLife(s.cfg.ResetTTL), reset),
	}, nil
}

// CheckSignInToken reports whether a sign-in link can still be used,
// without using it, and returns the email of the account it signs in to,
// which its page names: whoever holds the link was mailed it there.
// Opening a link costs a query, so it counts against the client network's
// confirmations (verify_confirm_ip) like pressing its button.
// Errors: *LimitedError, ErrInvalidToken, ErrUnavailable.
func (s *Service) CheckSignInToken(ctx context.Context, token string, c Client) (email string, err error) {
	if err := s.admitClient(ctx, FlowVerifyConfirm, c, EventVerificationRejected); err != nil {
		return "", err
	}
	if !wellFormedToken(token) {
		return "", ErrInvalidToken
	}
	email, err = s.store.SignInTokenLive(ctx, hashToken(token), s.now())
	if err != nil {
		return "", s.dbDown("reading sign-in token", err)
	}
	if email == "" {
		return "", ErrInvalidToken
	}
	return email, nil
}

// ConfirmSignIn spends a sign-in link and signs in the browser that
// confirms it: a new session, and the browser made a known device of the
// account. Nothing of the request that was held is used: the session is
// this browser's. oldSession, the session the browser had, if any, is
// ended. The token works once, even when confirmations race, and only
// while the account's password is the one the held sign-in verified.
// An account with a second factor gets no session but its second step
// (LoginResult.MFA, with ErrMFARequired), the device cookie with it. The
// device cookie comes with ErrUnavailable too once the token is spent
// (Postgres failed after it): the browser keeps the device the link
// earned, and signs in from it with the password, not a link it no
// longer has.
// Errors: *LimitedError, ErrInvalidToken, ErrMFARequired, ErrUnavailable.
func (s *Service) ConfirmSignIn(ctx context.Context, token string, c Client, oldSession string) (LoginResult, error) {
	source := c.Source()
	if err := s.admitClient(ctx, FlowVerifyConfirm, c, EventVerificationRejected); err != nil {
		return LoginResult{}, err
	}
	if !wellFormedToken(token) {
		return LoginResult{}, ErrInvalidToken
	}
	// Once admitted, the link is spent, recorded and its sign-in
	// finished whether or not its client waits: a hang-up as the spend
	// commits would otherwise leave the link used up, its device stored,
	// nothing recorded and no session for the browser that spent it.
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	now := s.now()
	// The nonce is drawn before the account is known: the cookie that
	// carries it is made for the account once the token is spent.
	nonce := newNonce()
	user, err := s.store.UseSignInToken(ctx, hashToken(token), now, nonceHash(nonce), s.cfg.MaxDevices)
	if errors.Is(err, ErrInvalidToken) {
		return LoginResult{}, err
	}
	if err != nil {
		return LoginResult{}, s.dbDown("confirming sign-in link", err)
	}
	s.deviceCache.purge()
	cookie := s.devices.cookie(user.Email, nonce, now)
	s.record(Event{Kind: EventVerificationConfirmed, Account: user.Email, UserID: user.ID, Source: source})
	s.record(Event{Kind: EventNewDevice, Account: user.Email, UserID: user.ID, Source: source})
	// The link proves the mailbox, not the factor: an account with one
	// gets its second step in this browser, which keeps the device
	// cookie the link earned, and no session before the code.
	if res, stepped, err := s.secondStepOrNone(ctx, user, user.PasswordHash, "", source, false); stepped {
		if errors.Is(err, ErrInvalidCredentials) {
			return LoginResult{}, ErrInvalidToken // signed out everywhere meanwhile, the device with it
		}
		res.Device = cookie
		return res, err
	}
	if err := s.Logout(ctx, oldSession); err != nil {
		return LoginResult{Device: cookie}, err
	}
	sess, err := s.createSession(ctx, user, user.PasswordHash, c)
	if errors.Is(err, ErrPasswordChanged) {
		// Replaced after the token was spent: the new password's
		// transaction forgot the device too.
		return LoginResult{}, ErrInvalidToken
	}
	if err != nil {
		return LoginResult{Device: cookie}, err
	}
	return LoginResult{Session: sess, Device: cookie}, nil
}

// EventNewDeviceSignedOut: a browser that first signed in to the account
// in the moments before attack mode started was signed out and forgotten
// (SignOutNewDevices); Detail "since" is how far back that reached.
const EventNewDeviceSignedOut = "new_device_signed_out"

// SignOutAgainAfter is when attack mode's start runs SignOutNewDevices a
// second time: a sign-in that read attack mode off before the first pass
// writes its device and session after it. That covers another replica
// learning of attack mode at its next tick (about 1 s), a device cookie
// its cache still takes for known (deviceCacheTTL), and a sign-in waiting
// for a hashing slot (2 s in xcloak serve) and hashing.
const SignOutAgainAfter = 5 * time.Second

// SignOutNewDevices forgets every device first seen at or after since and
// ends the sessions its account started since then, and those the
// accounts in also started since then. Attack mode calls it as it starts,
// reaching back over the detector's windows, and again SignOutAgainAfter
// later with the accounts the first pass returned: the sign-ins a stuffing
// run made with right passwords before the detector tripped came from
// browsers new to their accounts, and lose their sessions; from then on
// such browsers are held for verification. An owner who signed in from a
// new browser in those moments signs in again, by the mailed link. It
// does so only with XCLOAK_NEW_DEVICE_VERIFICATION=attack: with "never"
// such browsers would just sign in again, and with "always" every new
// device came through a mailed link. It returns the accounts whose
// devices it forgot.
//
// The applications' known devices first seen since then (the decision
// API's) are forgotten too, so that their next attempts are challenged;
// their sessions are the applications' own, which XCloak cannot end, and
// their accounts are kept only as HMACs, so no event names them: a
// warning says how many.
func (s *Service) SignOutNewDevices(ctx context.Context, since time.Time, also []User) ([]User, error) {
	if s.cfg.NewDeviceVerification != VerifyInAttack {
		return nil, nil
	}
	if s.apps != nil {
		n, err := s.apps.ForgetNewAppDevices(ctx, since)
		s.appDeviceCache.purge()
		if err != nil {
			s.metrics.dbErrors.Inc()
			s.log.ErrorContext(ctx, "attack mode: forgetting applications' new devices", "err", err)
		} else if n > 0 {
			s.log.Warn("attack mode: forgot applications' devices new to their accounts", "since", since, "devices", n)
		}
	}
	ids := make([]int64, len(also))
	for i, u := range also {
		ids[i] = u.ID
	}
	users, err := s.store.ForgetNewDevices(ctx, since, ids)
	s.sessionCache.purge()
	if err != nil {
		return nil, s.dbDown("forgetting new devices", err)
	}
	s.deviceCache.purge()
	for _, u := range users {
		s.record(Event{Kind: EventNewDeviceSignedOut, Account: u.Email, UserID: u.ID,
			Detail: map[string]string{"since": since.UTC().Format(time.RFC3339)}})
	}
	if len(users) > 0 {
		s.log.Warn("attack mode: signed out browsers new to their accounts", "since", since, "accounts", len(users))
	}
	return users, nil
}
