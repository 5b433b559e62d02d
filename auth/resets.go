package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// The reset-mail queue: resetQueue bounds the mails waiting to be sent,
// and resetWorkers send them at once, so that one slow mail server does
// not hold up every other recipient (resetsPerDomain keeps one domain
// from taking all the workers, and the limit of RuleResetDomain bounds the
// mails it gets).
const (
	resetQueue   = 1024
	resetWorkers = 4
)

// Why an accepted reset request's mail was not sent: the reason of an
// EventResetMailDropped and the label of xcloak_reset_mails_dropped_total.
const (
	DropQueueFull   = "queue_full"   // the queue was full
	DropDomainLimit = "domain_limit" // the recipient's domain had its limit of mails
	// DropAccountLimit: the account had its limit of held sign-ins' mails
	// (RuleVerifyMailAccount) or of notices (RuleNoticeAccount).
	DropAccountLimit = "account_limit"
	DropSendFailed   = "send_failed" // the mail server refused or did not answer
	DropUnavailable  = "unavailable" // Postgres or the limits could not be reached
)

// linkJob is an accepted request for a reset link or an unlock link. It
// is handled off the request path, so the response (always "accepted")
// takes the same time whether or not the account exists and whatever the
// mail server does. Both kinds share the queue, the senders and each
// domain's limit, so neither can be used to flood a mail domain.
type linkJob struct {
	email  string
	source string
	at     time.Time
	unlock bool // an unlock link rather than a reset link
	// changed: a notice that the password was changed, with a reset link
	// for an owner who did not change it (passwordchange.go).
	changed bool
	// signIn, when set, makes it the mail of a sign-in held for new-device
	// verification (verification.go).
	signIn *heldSignIn
	// newDevice and lockout, when set, make it the notice of a sign-in
	// from a new device or of the account's lockout (notify.go).
	newDevice *newDeviceNotice
	lockout   *lockoutNotice
	// factor, when set, makes it the notice of a second factor added or
	// removed (mfa_enrol.go).
	factor *factorNotice
	// admitted: its account's mail limit admitted it before it took a
	// place among its domain's mails (handleReset).
	admitted bool
}

// limitedPerAccount reports whether job's mail is limited per account
// (a held sign-in's, an owner's notice), not per domain.
func (job linkJob) limitedPerAccount() bool {
	return job.signIn != nil || job.ownersNotice()
}

// RequestReset accepts a password-reset request: after the per-network and
// per-account limits, it queues the work of looking the account up, making
// a token and mailing the link, and returns nil whether or not the account
// exists. Errors: ErrInvalidRequest, *LimitedError, ErrUnavailable.
func (s *Service) RequestReset(ctx context.Context, rawEmail string, c Client) error {
	return s.requestLink(ctx, rawEmail, c, linkRequest{
		flow:      FlowResetRequest,
		requested: EventResetRequested, rejected: EventResetRejected,
	})
}

// linkRequest is what sets a request for one kind of mailed link apart:
// its limits, its events and the link.
type linkRequest struct {
	flow                Flow   // whose rules limit it
	requested, rejected string // event kinds
	unlock              bool   // an unlock link, not a reset link
}

// requestLink accepts a request for a mailed link after the per-network
// and per-account limits, and queues the rest; it answers the same
// whether or not the account exists.
func (s *Service) requestLink(ctx context.Context, rawEmail string, c Client, r linkRequest) error {
	source := c.Source()
	email, err := NormaliseEmail(rawEmail)
	if err != nil {
		return ErrInvalidRequest
	}
	d, err := s.decide(ctx, s.rules(r.flow, Subject{Client: c, Account: email})...)
	if err != nil {
		return unavailable("checking limits", err)
	}
	if !d.Allowed {
		s.record(Event{Kind: r.rejected, Account: email, Source: source, Rule: rejectingRule(d)})
		return &LimitedError{RetryAfter: d.RetryAfter}
	}
	s.record(Event{Kind: r.requested, Account: email, Source: source})
	s.queueLink(linkJob{email: email, source: source, at: s.now(), unlock: r.unlock})
	return nil
}

// queueLink hands job to the senders, or counts it as dropped when the
// queue is full.
func (s *Service) queueLink(job linkJob) {
	s.resetsPending.Add(1)
	select {
	case s.resets <- job:
	default:
		s.resetsPending.Add(-1)
		s.log.Error("mail queue full; request dropped")
		s.recordDrop(job, DropQueueFull)
	}
}

// recordDrop counts a reset mail that was not sent, in the metrics and on
// the dashboard.
func (s *Service) recordDrop(job linkJob, reason string) {
	detail := map[string]string{"reason": reason}
	switch {
	case job.signIn != nil:
		detail["link"] = "sign_in"
	case job.unlock:
		detail["link"] = "unlock"
	case job.newDevice != nil:
		detail["link"] = "new_device"
	case job.lockout != nil:
		detail["link"] = "lockout"
	case job.factor != nil:
		detail["link"] = "factor"
	}
	if job.changed {
		detail["link"] = "password_changed"
	}
	s.record(Event{Kind: EventResetMailDropped, Account: job.email, Source: job.source, Detail: detail})
}

// runResets sends queued reset and unlock mails with resetWorkers workers until ctx
// is done, then sends what is still queued, within a bounded time.
func (s *Service) runResets(ctx context.Context) {
	// A mail being sent when shutdown begins is finished, not cut; the
	// mails begun after share what is left of the drain's 10 s.
	drain, cancelDrain := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelDrain()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(10*time.Second, cancelDrain) })
	defer stop()
	jobContext := func() (context.Context, context.CancelFunc) {
		if ctx.Err() != nil {
			return drain, func() {}
		}
		return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	}
	var wg sync.WaitGroup
	for range resetWorkers {
		wg.Go(func() {
			for {
				select {
				case job := <-s.resets:
					s.handleReset(jobContext, job)
				case <-ctx.Done():
					for {
						select {
						case job := <-s.resets:
							s.handleReset(jobContext, job)
						default:
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
}

// handleReset sends one queued link mail, or counts why it was not sent.
// If its recipient's domain already has resetsPerDomain mails being sent,
// the job waits for one of them instead, and the worker that finishes it
// sends this one next: no worker waits on a slow domain, and one domain
// never holds more than resetsPerDomain workers.
func (s *Service) handleReset(jobContext func() (context.Context, context.CancelFunc), job linkJob) {
	if !s.hasRecipient(jobContext, job) {
		// Mailed nothing, it takes no place among the mails waiting for
		// a busy domain: anyone can ask for made-up addresses of a slow
		// domain at will, and would otherwise fill those places and drop
		// the mails of its accounts.
		s.resetsPending.Add(-1)
		return
	}
	if job.limitedPerAccount() {
		// Decided before it takes a place among the domain's mails: a
		// mail its account's limit drops would otherwise wait for the
		// domain's senders first, and a flood of held sign-ins at one
		// provider (each retry of a right password is one) would delay
		// and drop that provider's other mails, owners' notices and
		// reset links included. Off the request path, as all of it.
		ctx, cancel := jobContext()
		reason := s.admitMail(ctx, User{Email: job.email}, job)
		cancel()
		if reason != "" {
			s.resetsPending.Add(-1)
			s.recordDrop(job, reason)
			return
		}
		job.admitted = true
	}
	domain := job.email[strings.LastIndexByte(job.email, '@')+1:]
	switch s.resetDomains.start(domain, job) {
	case domainWaits:
		return
	case domainFull:
		s.resetsPending.Add(-1)
		s.log.Error("reset queue full; request dropped")
		s.recordDrop(job, DropQueueFull)
		return
	}
	for {
		ctx, cancel := jobContext()
		if reason := s.sendReset(ctx, job); reason != "" {
			s.recordDrop(job, reason)
		}
		cancel()
		s.resetsPending.Add(-1)
		var more bool
		if job, more = s.resetDomains.next(domain); !more {
			return
		}
	}
}

// hasRecipient reports whether job may have a mail to send: false when
// its address has no account, or a disabled one, which are mailed
// nothing. A failed lookup says true: sendReset looks again, and counts
// the failure.
func (s *Service) hasRecipient(jobContext func() (context.Context, context.CancelFunc), job linkJob) bool {
	ctx, cancel := jobContext()
	defer cancel()
	user, err := s.UserByEmail(ctx, job.email)
	return !errors.Is(err, ErrNoUser) && (err != nil || !user.Disabled())
}

// sendReset looks the account up and, if it exists and its mail domain is
// within its limit, stores a token and mails the link. It returns why the
// mail was not sent ("" if it was, or if there is no account: nothing was
// to be sent).
func (s *Service) sendReset(ctx context.Context, job linkJob) (dropped string) {
	user, err := s.UserByEmail(ctx, job.email)
	if errors.Is(err, ErrNoUser) || (err == nil && user.Disabled()) {
		// A disabled account is mailed nothing, as if it did not
		// exist: the request was answered alike already.
		return ""
	}
	if err != nil {
		s.log.Error("mailing a link: reading user", "err", err)
		return DropUnavailable
	}
	if job.signIn != nil && (user.ID != job.signIn.userID || user.PasswordHash != job.signIn.passwordHash) {
		// The password was replaced since it was verified: the link
		// would not work. (Signed out everywhere, the password is still
		// known: the mail goes, without its sign-in link.)
		return ""
	}
	if reason := s.admitMail(ctx, user, job); reason != "" {
		return reason
	}
	var msg Message
	switch {
	case job.signIn != nil:
		msg, err = s.signInMail(ctx, user, job)
	case job.unlock:
		msg, err = s.unlockLink(ctx, user)
	case job.changed:
		msg, err = s.passwordChangedMail(ctx, user, job.at)
	case job.newDevice != nil:
		msg, err = s.newDeviceMail(ctx, user, job)
	case job.lockout != nil:
		msg, err = s.lockoutMail(ctx, user, job)
	case job.factor != nil:
		msg, err = s.factorMail(ctx, user, job)
	default:
		msg, err = s.resetLink(ctx, user)
	}
	if errors.Is(err, ErrNoUser) {
		// Disabled (or deleted) since it was read: mailed nothing, as
		// above.
		return ""
	}
	if err != nil {
		s.log.Error("storing a link's token", "err", err)
		return DropUnavailable
	}
	if err := s.mailer.Send(ctx, msg); err != nil {
		s.log.Error("mailing a link: sending mail", "err", err)
		return DropSendFailed
	}
	return ""
}

// ownersNotice reports whether job is a notice that follows a proof of the
// account's password, or of a session of it: a sign-in from a new device,
// a changed password, a factor added or removed. These tell the owner of
// a takeover, so they are not counted against the recipient domain's
// limit, which anyone can spend by asking for links of the domain's
// accounts: whoever took the account over could spend it first and
// silence them. They are bounded per account and kind instead
// (RuleNoticeAccount, noticeKind): one credential can make any of them in
// bulk (a passkey signing in from ever new networks, recovery codes made
// again and again from each known device), and none of one kind can
// spend what another's need.
func (job linkJob) ownersNotice() bool {
	return job.noticeKind() != ""
}

// noticeKind names the kind of an owner's notice job is, "" for none: a
// sign-in from a new device, a changed password, a factor.
func (job linkJob) noticeKind() string {
	switch {
	case job.newDevice != nil:
		return "new-device"
	case job.changed:
		return "password"
	case job.factor != nil:
		return "factor"
	}
	return ""
}

// admitMail passes a mail for user through the mail limits: an owner's
// notice through its account's for its kind (RuleNoticeAccount); a held
// sign-in's through its account's (RuleVerifyMailAccount); any other mail
// through its recipient domain's (RuleResetDomain). It returns why the
// mail is dropped, "" if it may go. Only mails that would be sent are
// counted, so requests for addresses without an account cannot use the
// domain's limit up.
//
// A held sign-in's mail goes only for the right password, so it spends
// nothing of the domain's limit: anyone with an account at the domain
// could otherwise fill the domain's window with mails of their own and
// learn from whether their next one came whether a guess held just before
// was right. What it can send is bounded by the passwords known, each
// account's mails by its own limit, and each goes to an owner whose
// password someone has.
func (s *Service) admitMail(ctx context.Context, user User, job linkJob) (dropped string) {
	if job.admitted {
		return ""
	}
	domain := user.Email[strings.LastIndexByte(user.Email, '@')+1:]
	flow, sub := FlowLinkMail, Subject{Domain: domain}
	switch {
	case job.ownersNotice():
		// Counted apart by kind (an account has no space), so that the
		// notices of one kind cannot spend another's.
		flow, sub = FlowNoticeMail, Subject{Account: job.noticeKind() + " " + user.Email}
	case job.signIn != nil:
		sub = Subject{Account: user.Email}
	}
	d, err := s.decide(ctx, s.rules(flow, sub)...)
	if err != nil {
		s.log.Error("mailing a link: checking the mail limits", "err", err)
		return DropUnavailable
	}
	if !d.Allowed {
		if name := d.Rejected()[0].Name; name == RuleVerifyMailAccount || name == RuleNoticeAccount {
			return DropAccountLimit
		}
		s.log.Warn("mailing a link: mail domain over its limit; mail dropped", "domain", domain)
		return DropDomainLimit
	}
	return ""
}

// resetLink stores a new reset token for user and returns the mail that
// carries its link.
func (s *Service) resetLink(ctx context.Context, user User) (Message, error) {
	link, err := s.resetURL(ctx, user)
	if err != nil {
		return Message{}, err
	}
	return Message{
		To:      user.Email,
		Subject: "Reset your XCloak password",
		Body: fmt.Sprintf("Someone asked to reset the password of the XCloak account for %s.\n\n"+
			"To choose a new password, open this link within %s. It works once.\n\n%s\n\n"+
			"If this was not you, ignore this mail: your password stays as it is.\n",
			user.Email, LinkLife(s.cfg.ResetTTL), link),
	}, nil
}

// resetURL stores a new reset token for user and returns its link.
func (s *Service) resetURL(ctx context.Context, user User) (string, error) {
	token, hash := newToken()
	now := s.linkMade()
	if err := s.store.AddResetToken(ctx, hash, user.ID, now, now.Add(s.cfg.ResetTTL), false); err != nil {
		return "", err
	}
	return s.cfg.PublicURL.JoinPath("password-reset", token).String(), nil
}

// CheckResetToken reports whether a reset token can still be used, without
// using it: nil or ErrInvalidToken. Opening the link costs a query, so it
// counts by the confirmation's rules like pressing its button
// (*LimitedError past them).
func (s *Service) CheckResetToken(ctx context.Context, token string, c Client) error {
	if err := s.admitClient(ctx, FlowResetConfirm, c, EventResetRejected); err != nil {
		return err
	}
	_, _, err := s.resetTokenUser(ctx, token)
	return err
}

func (s *Service) resetTokenUser(ctx context.Context, token string) (userID int64, email string, err error) {
	if !wellFormedToken(token) {
		return 0, "", ErrInvalidToken
	}
	userID, email, err = s.store.ResetTokenUser(ctx, hashToken(token), s.now())
	if errors.Is(err, ErrInvalidToken) {
		return 0, "", err
	}
	if err != nil {
		return 0, "", s.dbDown("reading reset token", err)
	}
	return userID, email, nil
}

// ConfirmReset sets a new password with a reset token. In one
// transaction it spends the token (and every other open token of the
// account), stores the new hash, ends every session of the account and
// forgets its known devices; then it clears the account's lockout.
// Errors: *LimitedError, ErrInvalidToken, ErrWeakPassword,
// ErrBreachedPassword, ErrUnavailable, ErrHasherBusy.
func (s *Service) ConfirmReset(ctx context.Context, token, password string, c Client) error {
	source := c.Source()
	if err := s.admitClient(ctx, FlowResetConfirm, c, EventResetRejected); err != nil {
		return err
	}
	if !wellFormedToken(token) {
		return ErrInvalidToken
	}
	if err := checkNewPassword(password); err != nil {
		return err
	}
	// Look up and hash only for a live token, so bad tokens cost neither.
	if _, _, err := s.resetTokenUser(ctx, token); err != nil {
		return err
	}
	if err := s.checkNotBreached(ctx, password); err != nil {
		return err
	}
	hash, err := s.hasher.Hash(ctx, password)
	if err != nil {
		return err
	}

	// Once hashed, the reset is done whether or not its client waits: a
	// hang-up while it commits must not leave it committed with its
	// lockout still in force (endLockoutAfterReset).
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	userID, email, err := s.store.ResetPassword(ctx, hashToken(token), s.now(), hash)
	s.deviceCache.purge()
	s.sessionCache.purge()
	if errors.Is(err, ErrInvalidToken) {
		return err
	}
	if err != nil {
		return s.dbDown("resetting password", err)
	}

	s.record(Event{Kind: EventResetCompleted, Account: email, UserID: userID, Source: source})
	s.endLockoutAfterReset(ctx, email, userID, source)
	return nil
}

// endLockoutAfterReset ends account's lockout once its password was reset:
// in the limits, and in the lockout log if either had it. The log may list
// a lock the limits here no longer hold (made in another replica's process
// while it was cut off from Redis, or lost by a Redis restart): left
// listed, it would be held again at that replica's failback or the next
// outage, locking the owner out after the reset. It is done whether or not
// the client waits for it (afterDecision): the password is reset already.
func (s *Service) endLockoutAfterReset(ctx context.Context, account string, userID int64, source string) {
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	wasLocked, err := s.limits.Clear(ctx, RuleLoginAccount, account)
	if err != nil {
		// The lock may still hold: the log keeps listing it, so that the
		// dashboard shows it and an administrator can end it.
		s.log.WarnContext(ctx, "clearing lockout after reset", "err", err)
		return
	}
	listed, err := s.store.LockoutListed(ctx, account, s.now())
	if err != nil {
		s.metrics.dbErrors.Inc()
		s.log.ErrorContext(ctx, "reading lockout after reset", "err", err)
	}
	if wasLocked || listed {
		s.clearLockoutRecord(ctx, account, userID, "reset", source)
	}
}
