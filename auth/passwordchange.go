package auth

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// EventPasswordChanged: an account's owner changed its password, signed
// in; every other session ended and every other known device was
// forgotten.
const EventPasswordChanged = "password_changed"

// PasswordChange is a signed-in owner's change of their password.
type PasswordChange struct {
	// Session is the token of the session the change is made from.
	Session string
	// Current is the password the owner types to prove it is them; New
	// replaces it.
	Current, New string
	Client       Client
	// DeviceCookie is the value of the account's device cookie, if the
	// browser sent one.
	DeviceCookie string
}

// ChangePassword changes the password of a signed-in account. The current
// password is checked as a sign-in checks it, by the same rules: the
// limits of the network and of the account (or of the known device it
// comes from) and its lockout, in one Redis round trip before any
// hashing, then a hash in the same pool; a wrong one counts towards the
// lockout and the spraying lock as a failed sign-in does. The new one
// must meet the password rules and not be breached.
//
// In one transaction the new hash is stored, every other session of the
// account ends, every known device but this browser's is forgotten, and
// the session it came from continues, free of MustChangePassword, under
// a new token, which the returned Session carries for the browser's
// cookie: a copy of the old one, taken while the session was restricted
// or by whoever the owner changes the password against, signs in no
// more. Then the owner is mailed, off the request path, that the password
// changed, with a reset link in case it was not them.
//
// Errors: ErrNoSession, ErrInvalidRequest, ErrWeakPassword,
// *LimitedError, ErrInvalidCredentials, ErrBreachedPassword,
// ErrUnavailable, ErrHasherBusy.
func (s *Service) ChangePassword(ctx context.Context, req PasswordChange) (Session, error) {
	sess, err := s.Session(ctx, req.Session)
	if err != nil {
		return Session{}, err
	}
	if err := checkNewPassword(req.New); err != nil {
		return Session{}, err
	}
	email, source := sess.Email, req.Client.Source()
	user, device, err := s.checkPasswordAgain(ctx, sess, req.Current, req.Client, req.DeviceCookie)
	if err != nil {
		return Session{}, err
	}

	if err := s.checkNotBreached(ctx, req.New); err != nil {
		return Session{}, err
	}
	// Refused after the current password is verified (and after the
	// breach check, whose answer is the more useful), so that it says
	// nothing of the password to whoever holds only the session. A
	// session that must change its password would otherwise lift its
	// restriction by setting the same one while breach lookups fail. They
	// are compared as stored: a full-width variant is the same password.
	if normalisePassword(req.New) == normalisePassword(req.Current) {
		return Session{}, ErrSamePassword
	}
	hash, err := s.hasher.Hash(ctx, req.New)
	if err != nil {
		return Session{}, err
	}
	// Once hashed, the change is done whether or not its client waits: a
	// client that hangs up as it commits must not leave it stored without
	// its event and its owner's notice.
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	var keep []byte
	if device != "" {
		keep = nonceHash(device)
	}
	// The session goes on under a new token, as a sign-in's does: the
	// change lifts a restriction and ends every other browser, which a
	// copy of the token it was made with must not outlive.
	token, tokenHash := s.sessionTokens.new()
	err = s.store.ChangePassword(ctx, user.ID, user.PasswordHash, hash, hashToken(req.Session), tokenHash, keep)
	s.deviceCache.purge()
	s.sessionCache.purge()
	switch {
	case errors.Is(err, ErrPasswordChanged):
		// Replaced meanwhile, by a reset say, which also ended this
		// session.
		return Session{}, ErrInvalidCredentials
	case errors.Is(err, ErrNoSession), errors.Is(err, ErrNoUser):
		// Ended, or deleted with its account, meanwhile; the cache was
		// emptied above.
		return Session{}, ErrNoSession
	case err != nil:
		return Session{}, s.dbDown("changing password", err)
	}
	s.record(Event{Kind: EventPasswordChanged, Account: email, UserID: user.ID, Source: source})
	s.notifyPasswordChanged(email, source)
	sess.Token, sess.MustChangePassword = token, false
	return sess, nil
}

// checkPasswordAgain checks the password of sess's account, typed again
// to change the password or a factor, as a sign-in from the same browser
// would: the sign-in's limits first, then the hash, a wrong one counted
// as a sign-in's. It returns the account and the nonce of the browser's
// device cookie if it is a known device, else "".
// Errors: ErrInvalidRequest, *LimitedError, ErrNoSession,
// ErrInvalidCredentials, ErrUnavailable, ErrHasherBusy.
func (s *Service) checkPasswordAgain(ctx context.Context, sess Session, password string, c Client, deviceCookie string) (User, string, error) {
	if password == "" || len(password) > MaxPasswordBytes {
		return User{}, "", ErrInvalidRequest
	}
	email, source := sess.Email, c.Source()
	device := s.deviceOf(ctx, email, deviceCookie)
	sub := Subject{Client: c, Account: email, Device: device, Password: s.sprayKeys.of(password), source: source}
	check, _, err := s.admitCheck(ctx, sub, password, s.now())
	if err != nil {
		return User{}, "", err
	}
	ctx, end := s.startCheck(ctx, check)
	defer end()
	user, err := s.UserByEmail(ctx, email)
	if errors.Is(err, ErrNoUser) {
		return User{}, "", ErrNoSession
	}
	if err != nil {
		return User{}, "", err
	}
	verify := s.hasher.Verify
	if device != "" {
		verify = s.hasher.VerifyTrusted
	}
	ok, _, err := verify(ctx, user.PasswordHash, password)
	if err != nil {
		return User{}, "", err
	}
	if !ok {
		return User{}, "", s.failed(ctx, email, user.ID, source, device, password)
	}
	return user, device, nil
}

// deviceOf returns the nonce of the browser's device cookie if it is a
// known device of the account with email, else "".
func (s *Service) deviceOf(ctx context.Context, email, cookie string) string {
	if cookie == "" {
		return ""
	}
	nonce, ok := s.devices.Check(email, cookie)
	if !ok {
		return ""
	}
	known, err := s.knownDevice(ctx, email, nonce)
	if err != nil {
		s.log.WarnContext(ctx, "device cookie not checked", "err", err)
		return ""
	}
	if !known {
		return ""
	}
	return nonce
}

// passwordChangedMail stores a reset token for user and returns the mail
// that tells the owner their password was changed, with its link.
func (s *Service) passwordChangedMail(ctx context.Context, user User, at time.Time) (Message, error) {
	token, hash := newToken()
	// A change notice's link outlives later changes: whoever made this one
	// cannot spend it by changing the password again. It lives as long as
	// the notices' window at least: whoever changes the password past
	// XCLOAK_LIMIT_NOTICE_ACCOUNT does so unannounced, spending every
	// other link the owner asks for, and would otherwise find a moment
	// when no notice's link is live either.
	now := s.linkMade()
	ttl := s.changeNoticeLinkTTL()
	if err := s.store.AddResetToken(ctx, hash, user.ID, now, now.Add(ttl), true); err != nil {
		return Message{}, err
	}
	link := s.cfg.PublicURL.JoinPath("password-reset", token).String()
	return Message{
		To:      user.Email,
		Subject: "Your XCloak password was changed",
		Body: fmt.Sprintf("The password of the XCloak account for %s was changed at %s.\n\n"+
			"Every other browser signed in to the account was signed out.\n\n"+
			"If this wasn't you, someone else knows your password: choose a new one "+
			"with this link within %s. It works once.\n\n%s\n\n"+
			"If it was you, there is nothing to do.\n",
			user.Email, at.UTC().Format(time.RFC1123), LinkLife(ttl), link),
	}, nil
}

// changeNoticeLinkTTL is how long a password-change notice's reset link
// lives: XCLOAK_RESET_TTL, or the window of XCLOAK_LIMIT_NOTICE_ACCOUNT if
// longer, so that once a change's notice is dropped by that limit, the
// notices before it still carry a live link until the window lets the
// next one through.
func (s *Service) changeNoticeLinkTTL() time.Duration {
	return max(s.cfg.ResetTTL, s.cfg.Limits.Of(RuleNoticeAccount).Window)
}
