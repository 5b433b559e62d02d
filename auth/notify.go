package auth

import (
	"context"
	"fmt"
	"time"
)

// Notifications tell an account's owner, by mail, of what they should
// know happened to it: a sign-in from a new device, a lockout, a password
// change. Each can be switched off (Config.NotifyNewDevice,
// NotifyLockout, NotifyPasswordChange). They are queued with the link
// mails (resets.go), after the request's own work, and sent by the same
// workers: a notification costs the request a channel send, never a
// database write or a mail server, and whether one is queued shows
// nowhere in the answer. Only the lockout notice, which anyone's guesses
// cause, counts against the recipient domain's limit of mails
// (linkJob.ownersNotice).
//
// Each is sent once for what it tells:
//   - a new device: only when a sign-in with the password made a session
//     for a browser that was no known device (its device is new by
//     construction: a fresh nonce). A browser signed in by a sign-in link
//     (verification.go) or made known by an unlock link is not notified:
//     its owner opened a mail to get there.
//   - a lockout: only when a failure locks the account (LockedNow), which
//     one failure per lock does; a lock that escalates or comes again is a
//     new lock. Accounts that do not exist get nothing, and a known
//     device's own lock, which holds only that browser, none either.
//   - a password change: once per change (passwordchange.go).

// newDeviceNotice is the mail job of a sign-in from a new device; its
// network and time are the job's.
type newDeviceNotice struct {
	// browser describes the User-Agent ("Firefox on Linux"), "" if it
	// names nothing DescribeBrowser knows.
	browser string
}

// lockoutNotice is the mail job of an account's lockout.
type lockoutNotice struct {
	until time.Time
}

// notifyNewDevice queues the mail to user of a sign-in from a new device.
func (s *Service) notifyNewDevice(user User, source, userAgent string) {
	if !s.cfg.NotifyNewDevice {
		return
	}
	s.queueLink(linkJob{email: user.Email, source: source, at: s.now(),
		newDevice: &newDeviceNotice{browser: noticeBrowser(userAgent)}})
}

// notifyLockout queues the mail of an account's lockout, until until, to
// its owner, if there is one.
func (s *Service) notifyLockout(email string, userID int64, source string, until time.Time) {
	if !s.cfg.NotifyLockout || userID == 0 {
		return
	}
	s.queueLink(linkJob{email: email, source: source, at: s.now(), lockout: &lockoutNotice{until: until}})
}

// notifyPasswordChanged queues the mail that tells the owner of email
// that its password was changed.
func (s *Service) notifyPasswordChanged(email, source string) {
	if !s.cfg.NotifyPasswordChange {
		return
	}
	s.queueLink(linkJob{email: email, source: source, at: s.now(), changed: true})
}

// newDeviceMail stores a reset token for user and returns the mail of a
// sign-in from a new device, with its link.
func (s *Service) newDeviceMail(ctx context.Context, user User, job linkJob) (Message, error) {
	link, err := s.resetURL(ctx, user)
	if err != nil {
		return Message{}, err
	}
	from := "network " + job.source
	if b := job.newDevice.browser; b != "" {
		from = b + ", " + from
	}
	return Message{
		To:      user.Email,
		Subject: "New sign-in to your XCloak account",
		Body: fmt.Sprintf("The XCloak account for %s was signed in to from a new browser:\n\n"+
			"  %s\n  at %s\n\n"+
			"If this was you, there is nothing to do.\n\n"+
			"Not you? Someone knows your password: reset it with this link within %s.\n"+
			"It works once, and signs every browser out.\n\n%s\n",
			user.Email, from, job.at.UTC().Format(time.RFC1123), LinkLife(s.cfg.ResetTTL), link),
	}, nil
}

// lockoutMail stores an unlock token for user and returns the mail that
// tells the owner the account was locked, with the link that lets their
// browser sign in past the lock (unlock.go).
func (s *Service) lockoutMail(ctx context.Context, user User, job linkJob) (Message, error) {
	token, hash := newToken()
	now := s.linkMade()
	if err := s.store.AddUnlockToken(ctx, hash, user.ID, now, now.Add(s.cfg.UnlockTTL)); err != nil {
		return Message{}, err
	}
	link := s.cfg.PublicURL.JoinPath("unlock", token).String()
	return Message{
		To:      user.Email,
		Subject: "Sign-ins to your XCloak account are locked",
		Body: fmt.Sprintf("After too many failed sign-ins, the last from network %s, sign-ins to the\n"+
			"XCloak account for %s from browsers it does not know are locked\n"+
			"until %s.\n\n"+
			"To sign in from this browser anyway, open this link within %s and press\n"+
			"the button: the browser can then sign in with your password. It works once.\n\n%s\n\n"+
			"If the failed sign-ins were not you, someone may be guessing your password:\n"+
			"consider choosing a new one.\n",
			job.source, user.Email, job.lockout.until.UTC().Format(time.RFC1123), LinkLife(s.cfg.UnlockTTL), link),
	}, nil
}

// noticeBrowser is the browser a notice names: DescribeBrowser's, or
// nothing for a header it cannot read.
func noticeBrowser(ua string) string {
	if b := DescribeBrowser(ua); b != UnknownBrowser {
		return b
	}
	return ""
}
