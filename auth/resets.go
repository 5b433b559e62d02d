package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/ratelimit"
)

// resetQueue bounds the reset mails waiting to be sent.
const resetQueue = 1024

// resetJob is an accepted reset request. It is handled off the request
// path, so the response (always "accepted") takes the same time whether or
// not the account exists and whatever the mail server does.
type resetJob struct {
	email  string
	source string
	at     time.Time
}

// RequestReset accepts a password-reset request: after the per-network and
// per-account limits, it queues the work of looking the account up, making
// a token and mailing the link, and returns nil whether or not the account
// exists. Errors: ErrInvalidRequest, *LimitedError, ErrUnavailable.
func (s *Service) RequestReset(ctx context.Context, rawEmail string, c Client) error {
	source := c.Source()
	email, err := NormaliseEmail(rawEmail)
	if err != nil {
		return ErrInvalidRequest
	}
	d, err := s.decide(ctx,
		ratelimit.Rule{Name: RuleResetIP, ID: source, Limit: s.cfg.Limits.ResetIP},
		ratelimit.Rule{Name: RuleResetAccount, ID: email, Limit: s.cfg.Limits.ResetAccount},
	)
	if err != nil {
		return unavailable("checking limits", err)
	}
	if !d.Allowed {
		s.record(Event{Kind: EventResetRejected, Account: email, Source: source, Rule: rejectingRule(d)})
		return &LimitedError{RetryAfter: d.RetryAfter}
	}
	job := resetJob{email: email, source: source, at: s.now()}
	select {
	case s.resets <- job:
	default:
		s.log.Error("reset queue full; request dropped", "account", email)
	}
	s.record(Event{Kind: EventResetRequested, Account: email, Source: source})
	return nil
}

// runResets sends queued reset mails until ctx is done, then sends what is
// still queued, within a bounded time.
func (s *Service) runResets(ctx context.Context) {
	for {
		select {
		case job := <-s.resets:
			// A mail being sent when shutdown begins is finished, not cut.
			send, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			s.sendReset(send, job)
			cancel()
		case <-ctx.Done():
			drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			for {
				select {
				case job := <-s.resets:
					s.sendReset(drain, job)
				default:
					return
				}
			}
		}
	}
}

func (s *Service) sendReset(ctx context.Context, job resetJob) {
	user, err := s.UserByEmail(ctx, job.email)
	if errors.Is(err, ErrNoUser) {
		return
	}
	if err != nil {
		s.log.Error("reset: reading user", "err", err)
		return
	}
	token, hash := newToken()
	_, err = s.db.Exec(ctx,
		`INSERT INTO password_reset_tokens (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
		hash, user.ID, job.at, job.at.Add(s.cfg.ResetTTL))
	if err != nil {
		s.log.Error("reset: storing token", "err", err)
		return
	}
	link := s.cfg.PublicURL.JoinPath("password-reset", token).String()
	msg := Message{
		To:      user.Email,
		Subject: "Reset your XCloak password",
		Body: fmt.Sprintf("Someone asked to reset the password of the XCloak account for %s.\n\n"+
			"To choose a new password, open this link within %s. It works once.\n\n%s\n\n"+
			"If this was not you, ignore this mail: your password stays as it is.\n",
			user.Email, s.cfg.ResetTTL, link),
	}
	if err := s.mailer.Send(ctx, msg); err != nil {
		s.log.Error("reset: sending mail", "err", err)
	}
}

// CheckResetToken reports whether a reset token can still be used, without
// using it: nil or ErrInvalidToken.
func (s *Service) CheckResetToken(ctx context.Context, token string) error {
	_, _, err := s.resetTokenUser(ctx, s.db, token)
	return err
}

func (s *Service) resetTokenUser(ctx context.Context, q querier, token string) (userID int64, email string, err error) {
	if !wellFormedToken(token) {
		return 0, "", ErrInvalidToken
	}
	err = q.QueryRow(ctx, `
		SELECT u.id, u.email FROM password_reset_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.token_hash = $1 AND t.used_at IS NULL AND t.expires_at > $2`, hashToken(token), s.now()).
		Scan(&userID, &email)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", ErrInvalidToken
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
// Errors: *LimitedError, ErrInvalidToken, ErrWeakPassword, ErrUnavailable,
// ErrHasherBusy.
func (s *Service) ConfirmReset(ctx context.Context, token, password string, c Client) error {
	source := c.Source()
	d, err := s.decide(ctx, ratelimit.Rule{Name: RuleResetConfirmIP, ID: source, Limit: s.cfg.Limits.ResetConfirmIP})
	if err != nil {
		return unavailable("checking limits", err)
	}
	if !d.Allowed {
		s.record(Event{Kind: EventResetRejected, Source: source, Rule: RuleResetConfirmIP})
		return &LimitedError{RetryAfter: d.RetryAfter}
	}
	if !wellFormedToken(token) {
		return ErrInvalidToken
	}
	if err := checkNewPassword(password); err != nil {
		return err
	}
	// Hash only for a live token, so bad tokens cost no hashing.
	if _, _, err := s.resetTokenUser(ctx, s.db, token); err != nil {
		return err
	}
	hash, err := s.hasher.Hash(ctx, password)
	if err != nil {
		return err
	}

	var userID int64
	var email string
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		now := s.now()
		// Spending the token first, with the same conditions, makes the
		// token single-use even when two confirmations race.
		err := tx.QueryRow(ctx, `
			UPDATE password_reset_tokens SET used_at = $2
			WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2
			RETURNING user_id`, hashToken(token), now).Scan(&userID)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrInvalidToken
		}
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT email FROM users WHERE id = $1`, userID).Scan(&email); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE password_reset_tokens SET used_at = $2 WHERE user_id = $1 AND used_at IS NULL`, userID, now); err != nil {
			return err
		}
		return replacePassword(ctx, tx, userID, hash)
	})
	s.deviceCache.purge()
	if errors.Is(err, ErrInvalidToken) {
		return err
	}
	if err != nil {
		return s.dbDown("resetting password", err)
	}

	s.record(Event{Kind: EventResetCompleted, Account: email, UserID: userID, Source: source})
	if wasLocked, err := s.limits.Clear(ctx, email); err != nil {
		s.log.Warn("clearing lockout after reset", "err", err)
	} else if wasLocked {
		s.clearLockoutRecord(ctx, email, userID, "reset", source)
	}
	return nil
}
