package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/xcloak/xcloak/auth"
)

var _ auth.FactorStore = (*Store)(nil)

// HasFactors implements auth.FactorStore.
func (s *Store) HasFactors(ctx context.Context, userID int64) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM second_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL)`,
		userID).Scan(&ok)
	return ok, err
}

// Factors implements auth.FactorStore.
func (s *Store) Factors(ctx context.Context, userID int64) ([]auth.Factor, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, user_id, kind, name, secret, created_at, confirmed_at, last_used_at, last_step
		FROM second_factors WHERE user_id = $1 ORDER BY created_at, id`, userID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (auth.Factor, error) {
		var f auth.Factor
		var confirmed, used *time.Time
		var step *int64
		err := r.Scan(&f.ID, &f.UserID, &f.Kind, &f.Name, &f.Secret, &f.CreatedAt, &confirmed, &used, &step)
		if confirmed != nil {
			f.ConfirmedAt = *confirmed
		}
		if used != nil {
			f.LastUsedAt = *used
		}
		if step != nil {
			f.LastStep = *step
		}
		return f, err
	})
}

// AddFactor implements auth.FactorStore. The account's row is locked
// first, the order every writer of an account's factors takes
// (lockForFirstFactor): a deletion of the account, which holds the row
// and then deletes the factors, would otherwise wait for the key this
// replaces while this waited for the row, and Postgres would abort one.
// Under it, two keys set up at once take turns, and the second replaces
// the first. An account deleted meanwhile has no row to lock: ErrNoUser.
func (s *Store) AddFactor(ctx context.Context, f auth.Factor) (int64, error) {
	var id int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `SELECT FROM users WHERE id = $1 FOR NO KEY UPDATE`, f.UserID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return auth.ErrNoUser
		}
		if _, err := tx.Exec(ctx, `DELETE FROM second_factors WHERE user_id = $1 AND kind = $2 AND confirmed_at IS NULL`,
			f.UserID, f.Kind); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO second_factors (user_id, kind, name, secret, created_at)
			VALUES ($1, $2, $3, $4, $5) RETURNING id`, f.UserID, f.Kind, f.Name, f.Secret, f.CreatedAt).Scan(&id)
	})
	return id, err
}

// ConfirmFactor implements auth.FactorStore.
func (s *Store) ConfirmFactor(ctx context.Context, userID, id, step int64, recovery [][]byte, at time.Time, v auth.Verified) (codes bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The account's row before the factor's, the order every writer
		// of an account's factors and codes takes (RemoveFactors): one
		// that locked the factor first could deadlock with a removal.
		first, err := lockForFirstFactor(ctx, tx, userID, v)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE second_factors SET confirmed_at = $3, last_step = $4, last_used_at = $3
			WHERE id = $1 AND user_id = $2 AND confirmed_at IS NULL`, id, userID, at, step)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return auth.ErrNoFactor
		}
		if err := withinFactorBound(ctx, tx, userID); err != nil {
			return err
		}
		if recovery == nil || !first {
			return nil
		}
		codes = true
		return replaceRecoveryCodes(ctx, tx, userID, recovery, at)
	})
	return codes && err == nil, err
}

// lockForFirstFactor locks the account's row in tx, the first step of
// every writer of its factors and codes, and reports whether it has no
// confirmed factor yet. Only then does a factor's confirmation write the
// codes its page shows: of two first factors confirmed at once, the one
// that comes second keeps the first's, which its owner has been shown.
// ErrPasswordChanged if v is no longer the account's, or it was disabled
// or deleted: a new password or a sign-out everywhere that commits first
// leaves no row to match, and one that commits after finds the factor.
func lockForFirstFactor(ctx context.Context, tx pgx.Tx, userID int64, v auth.Verified) (bool, error) {
	var same bool
	err := tx.QueryRow(ctx, `SELECT password_hash = $2 AND sign_outs = $3 AND disabled_at IS NULL FROM users
		WHERE id = $1 FOR NO KEY UPDATE`, userID, v.PasswordHash, v.SignOuts).Scan(&same)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && !same {
		return false, auth.ErrPasswordChanged
	}
	if err != nil {
		return false, err
	}
	var has bool
	err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM second_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL)`,
		userID).Scan(&has)
	return !has, err
}

// withinFactorBound returns auth.ErrTooManyFactors, which rolls tx back,
// if the account, whose row tx has locked (lockForFirstFactor), has more
// than auth.MaxFactors confirmed factors with the one tx confirmed: under
// that lock, factors added at once take turns, and none passes the bound.
func withinFactorBound(ctx context.Context, tx pgx.Tx, userID int64) error {
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM second_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL`,
		userID).Scan(&n); err != nil {
		return err
	}
	if n > auth.MaxFactors {
		return auth.ErrTooManyFactors
	}
	return nil
}

// UseTOTPStep implements auth.FactorStore: one conditional UPDATE, so of
// two requests with a code of one step, one finds the step used.
func (s *Store) UseTOTPStep(ctx context.Context, id, step int64, at time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE second_factors SET last_step = $2, last_used_at = $3
		WHERE id = $1 AND confirmed_at IS NOT NULL AND (last_step IS NULL OR last_step < $2)`, id, step, at)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// UseRecoveryCode implements auth.FactorStore: one conditional UPDATE.
func (s *Store) UseRecoveryCode(ctx context.Context, userID int64, hash []byte, at time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE recovery_codes SET used_at = $3 WHERE user_id = $1 AND hash = $2 AND used_at IS NULL`,
		userID, hash, at)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// UseRecoveryCodeForStep implements auth.FactorStore: the code spent and
// the step deleted in one transaction, which a code not found, or a step
// gone, rolls back. Of answers at once, the others' deletions wait for
// the first's row lock and find no step once it commits. The code's row
// is taken before the step's, in the order a removal of the last factor
// (RemoveFactors) takes them, so that neither waits for the other in a
// cycle.
func (s *Store) UseRecoveryCodeForStep(ctx context.Context, userID int64, hash []byte, tokenHash, bindingHash []byte, at time.Time) (auth.MFAChallenge, bool, error) {
	var step auth.MFAChallenge
	errNoCode := errors.New("no such recovery code")
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE recovery_codes SET used_at = $3 WHERE user_id = $1 AND hash = $2 AND used_at IS NULL`,
			userID, hash, at)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errNoCode
		}
		step, err = consumeMFAChallenge(ctx, tx, tokenHash, bindingHash, at)
		return err
	})
	if errors.Is(err, errNoCode) {
		return auth.MFAChallenge{}, false, nil
	}
	if err != nil {
		return auth.MFAChallenge{}, false, err
	}
	return step, true, nil
}

// RecoveryCodesLeft implements auth.FactorStore.
func (s *Store) RecoveryCodesLeft(ctx context.Context, userID int64) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM recovery_codes WHERE user_id = $1 AND used_at IS NULL`, userID).Scan(&n)
	return n, err
}

// ReplaceRecoveryCodes implements auth.FactorStore. The account's row is
// locked first, so that replacements, and removals of its factors, take
// turns: each deletes the set the one before it wrote. The account's
// remembered browsers are forgotten with the old set.
func (s *Store) ReplaceRecoveryCodes(ctx context.Context, userID int64, recovery [][]byte, at time.Time, v auth.Verified) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		none, err := lockForFirstFactor(ctx, tx, userID, v)
		if err != nil {
			return err
		}
		if none {
			return auth.ErrNoFactor
		}
		// The browsers remembered go with the codes replaced: one may
		// have passed the second step with a code of the old set.
		if err := forgetRememberedBrowsers(ctx, tx, userID); err != nil {
			return err
		}
		return replaceRecoveryCodes(ctx, tx, userID, recovery, at)
	})
}

// forgetRememberedBrowsers ends "remember this browser" for every device
// of the account, in tx: each is asked for the second step again.
func forgetRememberedBrowsers(ctx context.Context, tx pgx.Tx, userID int64) error {
	_, err := tx.Exec(ctx, `UPDATE devices SET mfa_remembered_until = NULL WHERE user_id = $1 AND mfa_remembered_until IS NOT NULL`, userID)
	return err
}

// replaceRecoveryCodes writes recovery as the account's only recovery
// codes, in tx. The account's row is locked (again, if tx holds it
// already), so that every writer of an account's codes (a first factor
// confirmed or added, a replacement, a removal) takes its turn: each
// deletes the set the one before it committed, and one set is left,
// whole.
func replaceRecoveryCodes(ctx context.Context, tx pgx.Tx, userID int64, recovery [][]byte, at time.Time) error {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE`, userID); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM recovery_codes WHERE user_id = $1`, userID); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO recovery_codes (user_id, hash, created_at) SELECT $1, h, $3 FROM unnest($2::bytea[]) AS h`,
		userID, recovery, at)
	return err
}

// RemoveFactors implements auth.FactorStore.
func (s *Store) RemoveFactors(ctx context.Context, userID, id int64, v *auth.Verified) (int64, error) {
	var removed int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The account's row first, so that two removals, or a removal and
		// a confirmation, of one account take turns; the owner's only
		// while the password it checked is still the account's and no
		// sign-out came since.
		if v != nil {
			if _, err := lockForFirstFactor(ctx, tx, userID, *v); err != nil {
				return err
			}
		} else if _, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE`, userID); err != nil {
			return err
		}
		var err error
		if id == 0 {
			// Every factor, a key being set up too; counted are the
			// confirmed ones, which the account had.
			err = tx.QueryRow(ctx, `WITH gone AS (DELETE FROM second_factors WHERE user_id = $1 RETURNING confirmed_at)
				SELECT count(confirmed_at) FROM gone`, userID).Scan(&removed)
		} else {
			var tag pgconn.CommandTag
			tag, err = tx.Exec(ctx, `DELETE FROM second_factors WHERE user_id = $1 AND id = $2 AND confirmed_at IS NOT NULL`, userID, id)
			if err == nil && tag.RowsAffected() == 0 {
				return auth.ErrNoFactor
			}
			removed = tag.RowsAffected()
		}
		if err != nil {
			return err
		}
		// Any factor removed, the browsers remembered go: one may have
		// passed the second step with it.
		if err := forgetRememberedBrowsers(ctx, tx, userID); err != nil {
			return err
		}
		var left bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM second_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL)`,
			userID).Scan(&left); err != nil {
			return err
		}
		if left {
			return nil
		}
		for _, q := range []string{
			`DELETE FROM recovery_codes WHERE user_id = $1`,
			`DELETE FROM mfa_challenges WHERE user_id = $1`,
		} {
			if _, err := tx.Exec(ctx, q, userID); err != nil {
				return err
			}
		}
		return nil
	})
	return removed, err
}

// AddMFAChallenge implements auth.FactorStore. The account's row is
// share-locked for it, as CreateSession's: a sign-out everywhere or a
// disabling that commits first leaves no row to match (a step stored for
// a disabled account would work once it is enabled), and one that
// commits after deletes the step. The row is taken before the expired
// steps are forgotten, as each of those takes it before it deletes the
// account's steps: in the other order, each would wait for the other.
func (s *Store) AddMFAChallenge(ctx context.Context, c auth.MFAChallenge) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 AND sign_outs = $2 AND disabled_at IS NULL FOR SHARE`,
			c.UserID, c.SignOuts)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return auth.ErrPasswordChanged
		}
		if _, err := tx.Exec(ctx, `DELETE FROM mfa_challenges WHERE user_id = $1 AND expires_at <= $2`, c.UserID, c.CreatedAt); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO mfa_challenges (token_hash, user_id, binding_hash, password_hash, must_change, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			c.TokenHash, c.UserID, c.BindingHash, c.PasswordHash, c.MustChange, c.CreatedAt, c.ExpiresAt)
		return err
	})
}

const challengeColumns = `c.token_hash, c.binding_hash, c.user_id, u.email, c.password_hash, c.must_change, c.created_at, c.expires_at`

func scanChallenge(row pgx.Row) (auth.MFAChallenge, error) {
	var c auth.MFAChallenge
	err := row.Scan(&c.TokenHash, &c.BindingHash, &c.UserID, &c.Email, &c.PasswordHash, &c.MustChange, &c.CreatedAt, &c.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.MFAChallenge{}, auth.ErrInvalidToken
	}
	return c, err
}

// MFAChallenge implements auth.FactorStore. A disabled account has no
// second step: one begun as it was being disabled is no step.
func (s *Store) MFAChallenge(ctx context.Context, tokenHash, bindingHash []byte, now time.Time) (auth.MFAChallenge, error) {
	return scanChallenge(s.pool.QueryRow(ctx, `SELECT `+challengeColumns+` FROM mfa_challenges c JOIN users u ON u.id = c.user_id
		WHERE c.token_hash = $1 AND c.binding_hash = $2 AND c.expires_at > $3 AND u.disabled_at IS NULL`, tokenHash, bindingHash, now))
}

// ConsumeMFAChallenge implements auth.FactorStore: DELETE ... RETURNING,
// so of two requests one gets the row.
func (s *Store) ConsumeMFAChallenge(ctx context.Context, tokenHash, bindingHash []byte, now time.Time) (auth.MFAChallenge, error) {
	return consumeMFAChallenge(ctx, s.pool, tokenHash, bindingHash, now)
}

// consumeMFAChallenge deletes the live second step of tokenHash for
// bindingHash and returns it, on q (the pool, or a transaction).
func consumeMFAChallenge(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, tokenHash, bindingHash []byte, now time.Time) (auth.MFAChallenge, error) {
	return scanChallenge(q.QueryRow(ctx, `DELETE FROM mfa_challenges c USING users u
		WHERE u.id = c.user_id AND c.token_hash = $1 AND c.binding_hash = $2 AND c.expires_at > $3 AND u.disabled_at IS NULL
		RETURNING `+challengeColumns, tokenHash, bindingHash, now))
}

// SpendHeldMFA implements auth.FactorStore: the mark is a row of
// mfa_challenges under a hash no token has, and a second one conflicts
// with it.
func (s *Store) SpendHeldMFA(ctx context.Context, c auth.MFAChallenge) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO mfa_challenges (token_hash, user_id, binding_hash, password_hash, must_change, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (token_hash) DO NOTHING`,
		c.TokenHash, c.UserID, c.BindingHash, c.PasswordHash, c.MustChange, c.CreatedAt, c.ExpiresAt)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// RememberMFA implements auth.FactorStore.
//
// The browser is remembered after its session is made, so a removal of
// the account's last factor, which forgets every remembered browser, can
// commit in between: the account's row is share-locked first, which such
// a removal holds for update, and the browser remembered only if a
// confirmed factor is left once it is free, and the row's password and
// sign-outs are still those the sign-in verified.
func (s *Store) RememberMFA(ctx context.Context, userID int64, nonceHash []byte, until time.Time, v auth.Verified) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var current bool
		err := tx.QueryRow(ctx, `SELECT password_hash = $2 AND sign_outs = $3 FROM users WHERE id = $1 FOR SHARE`,
			userID, v.PasswordHash, v.SignOuts).Scan(&current)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !current) {
			return nil
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE devices SET mfa_remembered_until = $3 WHERE nonce_hash = $2 AND user_id = $1
			AND EXISTS (SELECT 1 FROM second_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL)`,
			userID, nonceHash, until)
		return err
	})
}

// MFARemembered implements auth.FactorStore.
func (s *Store) MFARemembered(ctx context.Context, nonceHash []byte, now, latest time.Time) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM devices WHERE nonce_hash = $1 AND mfa_remembered_until > $2
		AND mfa_remembered_until <= $3)`, nonceHash, now, latest).Scan(&ok)
	return ok, err
}

// NewestTOTPFactor implements auth.FactorStore. Newest by id, the order
// rows were added in: the primary key's index is read backwards, and the
// search stops at the first match, which on a deployment whose key is in
// use is the first row read. It runs once, at start.
func (s *Store) NewestTOTPFactor(ctx context.Context, format byte) (auth.Factor, error) {
	var f auth.Factor
	var used *time.Time
	var step *int64
	err := s.pool.QueryRow(ctx, `SELECT id, user_id, kind, name, secret, created_at, confirmed_at, last_used_at, last_step
		FROM second_factors WHERE kind = $1 AND confirmed_at IS NOT NULL AND substring(secret FROM 1 FOR 1) = $2
		ORDER BY id DESC LIMIT 1`, auth.FactorTOTP, []byte{format}).
		Scan(&f.ID, &f.UserID, &f.Kind, &f.Name, &f.Secret, &f.CreatedAt, &f.ConfirmedAt, &used, &step)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.Factor{}, auth.ErrNoFactor
	}
	if used != nil {
		f.LastUsedAt = *used
	}
	if step != nil {
		f.LastStep = *step
	}
	return f, err
}

// CountFactorAccounts implements dashboard.Store.
func (s *Store) CountFactorAccounts(ctx context.Context) (accounts, withFactor int64, err error) {
	err = s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM users),
		(SELECT count(DISTINCT user_id) FROM second_factors WHERE confirmed_at IS NOT NULL)`).Scan(&accounts, &withFactor)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: counting accounts: %w", auth.ErrUnavailable, err)
	}
	return accounts, withFactor, nil
}
