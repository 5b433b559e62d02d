package auth

import (
	"context"
	"errors"
	"fmt"
)

// Unlock links give the owner of a targeted account a way in that needs no
// administrator. Anyone may ask for one for any address ("Locked out? Email
// me a link"); the answer is the same whether or not the account exists or
// is locked, and the lookup and the mail happen off the request path, as
// for reset requests. The link goes to every existing account, locked or
// not: an attacker can shut unknown browsers out with the account's rate
// limit alone, without a lock, and whether the account is locked is for
// Redis to say, which may be down.
//
// Opening the link shows a button; pressing it (a POST, so that mail
// scanners that follow links spend nothing) spends the token, which is
// random, stored hashed, single-use and short-lived, and makes that browser
// a known device of the account. The browser then signs in through its own
// device limit, past the account's lock. The lock itself stays for
// everybody else: ending it would tell the attacker that the account exists
// and that its owner acted. An administrator's Unlock still ends it.

// Unlock link events.
const (
	EventUnlockRequested = "unlock_requested"
	EventUnlockRejected  = "unlock_rejected" // Rule says which limit
	EventUnlockConfirmed = "unlock_confirmed"
)

// RequestUnlock accepts a request for an unlock link: after the
// per-network and per-account limits, it queues the work of looking the
// account up, making a token and mailing the link, and returns nil whether
// or not the account exists or is locked. Errors: ErrInvalidRequest,
// *LimitedError, ErrUnavailable.
func (s *Service) RequestUnlock(ctx context.Context, rawEmail string, c Client) error {
	return s.requestLink(ctx, rawEmail, c, linkRequest{
		flow:      FlowUnlockRequest,
		requested: EventUnlockRequested, rejected: EventUnlockRejected,
		unlock: true,
	})
}

// unlockLink stores a new unlock token for user and returns the mail that
// carries its link.
func (s *Service) unlockLink(ctx context.Context, user User) (Message, error) {
	token, hash := newToken()
	now := s.linkMade()
	if err := s.store.AddUnlockToken(ctx, hash, user.ID, now, now.Add(s.cfg.UnlockTTL)); err != nil {
		return Message{}, err
	}
	link := s.cfg.PublicURL.JoinPath("unlock", token).String()
	return Message{
		To:      user.Email,
		Subject: "Sign in to XCloak from a new browser",
		Body: fmt.Sprintf("Someone asked for a link to sign in to the XCloak account for %s\n"+
			"while sign-ins to it are held back.\n\n"+
			"Open this link within %s in the browser you want to sign in with, and\n"+
			"press the button: that browser can then sign in with your password.\n"+
			"It works once.\n\n%s\n\n"+
			"If this was not you, ignore this mail. If your account is held back and\n"+
			"you did not cause it, someone may be guessing your password: consider\n"+
			"choosing a new one.\n",
			user.Email, LinkLife(s.cfg.UnlockTTL), link),
	}, nil
}

// CheckUnlockToken reports whether an unlock token can still be used,
// without using it: nil or ErrInvalidToken. Opening the link costs a
// query, so it counts by the confirmation's rules like pressing its
// button (*LimitedError past them).
func (s *Service) CheckUnlockToken(ctx context.Context, token string, c Client) error {
	if err := s.admitClient(ctx, FlowUnlockConfirm, c, EventUnlockRejected); err != nil {
		return err
	}
	if !wellFormedToken(token) {
		return ErrInvalidToken
	}
	ok, err := s.store.UnlockTokenLive(ctx, hashToken(token), s.now())
	if err != nil {
		return s.dbDown("reading unlock token", err)
	}
	if !ok {
		return ErrInvalidToken
	}
	return nil
}

// ConfirmUnlock spends an unlock token and makes the browser a known device
// of its account, at once; the caller sets the returned cookie. The token
// works once even when confirmations race. The account's lockout is left
// as it is. Errors: *LimitedError, ErrInvalidToken, ErrUnavailable.
func (s *Service) ConfirmUnlock(ctx context.Context, token string, c Client) (DeviceCookie, error) {
	source := c.Source()
	if err := s.admitClient(ctx, FlowUnlockConfirm, c, EventUnlockRejected); err != nil {
		return DeviceCookie{}, err
	}
	if !wellFormedToken(token) {
		return DeviceCookie{}, ErrInvalidToken
	}
	// Once admitted, the link is spent and recorded whether or not its
	// client waits: a hang-up as the spend commits would otherwise leave
	// the link used up, its device stored and nothing recorded.
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	now := s.now()
	// The nonce is drawn before the account is known: the cookie that
	// carries it is made for the account once the token is spent.
	nonce := newNonce()
	userID, email, err := s.store.UseUnlockToken(ctx, hashToken(token), now, nonceHash(nonce), s.cfg.MaxDevices)
	if errors.Is(err, ErrInvalidToken) {
		return DeviceCookie{}, err
	}
	if err != nil {
		return DeviceCookie{}, s.dbDown("confirming unlock link", err)
	}
	s.deviceCache.purge()
	cookie := s.devices.cookie(email, nonce, now)
	s.record(Event{Kind: EventUnlockConfirmed, Account: email, UserID: userID, Source: source})
	s.record(Event{Kind: EventNewDevice, Account: email, UserID: userID, Source: source})
	return cookie, nil
}
