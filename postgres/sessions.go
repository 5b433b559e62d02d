package postgres

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
)

// CreateSession implements auth.SessionStore; a session without a
// public id gets a random one, one without an end ends as it expires, and a disabled account none (as if its
// password had changed: DisableUser locks the row as a replacement does).
// The account's row is share-locked for it: a password replacement or a
// sign-out everywhere that commits first leaves no row to match, and one
// that commits after sees the session and ends it.
func (s *Store) CreateSession(ctx context.Context, tokenHash []byte, sess auth.Session, passwordHash string, signOuts int64) error {
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO sessions (id_hash, user_id, created_at, expires_at, last_seen_at, must_change_password, public_id, network, browser, ends_at,
			legacy_token)
		SELECT $1, id, $3, $4, $3, $6, COALESCE(NULLIF($7, ''), replace(gen_random_uuid()::text, '-', '')), $8, $9, $11, false FROM users
		WHERE id = $2 AND password_hash = $5 AND sign_outs = $10 AND disabled_at IS NULL FOR SHARE`,
		tokenHash, sess.UserID, sess.CreatedAt, sess.ExpiresAt, passwordHash, sess.MustChangePassword,
		sess.PublicID, sess.Network, sess.Browser, signOuts, cmp.Or(sess.EndsAt, sess.ExpiresAt))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return auth.ErrPasswordChanged
	}
	return nil
}

// SessionByHash implements auth.SessionStore.
func (s *Store) SessionByHash(ctx context.Context, tokenHash []byte, now time.Time) (auth.Session, error) {
	var sess auth.Session
	err := s.pool.QueryRow(ctx, `
		SELECT s.user_id, u.email, u.is_admin, s.created_at, s.expires_at, COALESCE(s.ends_at, s.expires_at), s.must_change_password,
			s.public_id, s.network, s.browser, s.last_seen_at
		FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.id_hash = $1 AND s.expires_at > $2 AND u.disabled_at IS NULL`, tokenHash, now).
		Scan(&sess.UserID, &sess.Email, &sess.IsAdmin, &sess.CreatedAt, &sess.ExpiresAt, &sess.EndsAt, &sess.MustChangePassword,
			&sess.PublicID, &sess.Network, &sess.Browser, &sess.LastSeenAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.Session{}, auth.ErrNoSession
	}
	return sess, err
}

// LegacySessionsLive implements auth.SessionStore, through the partial
// index of the sessions marked legacy_token (migration 00023).
func (s *Store) LegacySessionsLive(ctx context.Context, now time.Time) (bool, error) {
	var live bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE legacy_token AND expires_at > $1)`, now).Scan(&live)
	return live, err
}

// DeleteSession implements auth.SessionStore.
func (s *Store) DeleteSession(ctx context.Context, tokenHash []byte) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE id_hash = $1`, tokenHash)
	return err
}

// TouchSession implements auth.SessionStore.
// A session from before migration 00020 has no ends_at: its expires_at is
// its end, copied there as it is first moved. LEAST ignores a NULL, so a
// zero idleEnd sets the expiry back to the end.
func (s *Store) TouchSession(ctx context.Context, tokenHash []byte, at time.Time, minGap time.Duration, idleEnd time.Time) error {
	_, err := s.pool.Exec(ctx, `
		UPDATE sessions SET last_seen_at = $2, ends_at = COALESCE(ends_at, expires_at),
			expires_at = LEAST(COALESCE(ends_at, expires_at), $4)
		WHERE id_hash = $1 AND last_seen_at <= $3 AND expires_at > $2`,
		tokenHash, at, at.Add(-minGap), orNull(idleEnd))
	return err
}

// orNull is t, or NULL if it is zero.
func orNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// AccountSessions implements auth.SessionStore.
func (s *Store) AccountSessions(ctx context.Context, userID int64, now time.Time, limit int) ([]auth.SessionInfo, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT public_id, created_at, last_seen_at, expires_at, network, browser FROM sessions
		WHERE user_id = $1 AND expires_at > $2 ORDER BY last_seen_at DESC, created_at DESC, public_id LIMIT $3`, userID, now, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (auth.SessionInfo, error) {
		var v auth.SessionInfo
		err := row.Scan(&v.PublicID, &v.CreatedAt, &v.LastSeenAt, &v.ExpiresAt, &v.Network, &v.Browser)
		return v, err
	})
}

// AccountDevices implements auth.SessionStore.
func (s *Store) AccountDevices(ctx context.Context, userID int64, limit int) ([]auth.DeviceInfo, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT public_id, created_at, last_seen_at FROM devices
		WHERE user_id = $1 ORDER BY last_seen_at DESC, created_at DESC, public_id LIMIT $2`, userID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (auth.DeviceInfo, error) {
		var v auth.DeviceInfo
		err := row.Scan(&v.PublicID, &v.CreatedAt, &v.LastSeenAt)
		return v, err
	})
}

// asOwner runs f in a transaction that holds account userID's row, once
// the session stored under byHash, which asks, is found still to be the
// account's: auth.ErrNoUser if the account is gone, auth.ErrNoSession if
// the session is. The row is locked first, as a password change, a reset
// and a sign-out everywhere lock it before they end the account's
// sessions, and the session is looked for by a statement of its own
// after the lock is held, so that it sees what such an ending that held
// the row before committed: a request whose session was read just before
// the owner changed the password acts on nothing after the change.
func (s *Store) asOwner(ctx context.Context, userID int64, byHash []byte, f func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `SELECT FROM users WHERE id = $1 FOR NO KEY UPDATE`, userID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return auth.ErrNoUser
		}
		if err := sessionLives(ctx, tx, userID, byHash); err != nil {
			return err
		}
		return f(tx)
	})
}

// sessionLives is nil if the session stored under tokenHash is account
// userID's, auth.ErrNoSession if it is not (any more).
func sessionLives(ctx context.Context, tx pgx.Tx, userID int64, tokenHash []byte) error {
	var live bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE id_hash = $1 AND user_id = $2)`, tokenHash, userID).Scan(&live)
	if err == nil && !live {
		return auth.ErrNoSession
	}
	return err
}

// EndSession implements auth.SessionStore.
func (s *Store) EndSession(ctx context.Context, userID int64, byHash []byte, publicID string) error {
	return s.asOwner(ctx, userID, byHash, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1 AND public_id = $2`, userID, publicID)
		if err == nil && tag.RowsAffected() == 0 {
			return auth.ErrNotListed
		}
		return err
	})
}

// EndOtherSessions implements auth.SessionStore.
func (s *Store) EndOtherSessions(ctx context.Context, userID int64, keepHash []byte) (n int64, err error) {
	// Asked by the session of keepHash (asOwner): one ended meanwhile ends
	// no other and counts no sign-out.
	err = s.asOwner(ctx, userID, keepHash, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE users SET sign_outs = sign_outs + 1 WHERE id = $1`, userID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1 AND id_hash <> $2`, userID, keepHash)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		// Its pending second steps and sign-in links, each a session
		// to be.
		for _, q := range []string{`DELETE FROM mfa_challenges WHERE user_id = $1`, `DELETE FROM sign_in_tokens WHERE user_id = $1 AND used_at IS NULL`} {
			if _, err := tx.Exec(ctx, q, userID); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// ForgetDevice implements auth.SessionStore.
func (s *Store) ForgetDevice(ctx context.Context, userID int64, byHash []byte, publicID string) error {
	return s.asOwner(ctx, userID, byHash, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM devices WHERE user_id = $1 AND public_id = $2`, userID, publicID)
		if err == nil && tag.RowsAffected() == 0 {
			return auth.ErrNotListed
		}
		return err
	})
}

// SignOutEverywhere implements auth.SessionStore.
func (s *Store) SignOutEverywhere(ctx context.Context, email string) (userID int64, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `UPDATE users SET sign_outs = sign_outs + 1 WHERE email = $1 RETURNING id`, email).Scan(&userID)
		if errors.Is(err, pgx.ErrNoRows) {
			return auth.ErrNoUser
		}
		if err != nil {
			return err
		}
		// Its sessions, and its pending second steps and sign-in links,
		// each a session to be.
		for _, q := range []string{`DELETE FROM sessions WHERE user_id = $1`, `DELETE FROM mfa_challenges WHERE user_id = $1`,
			`DELETE FROM sign_in_tokens WHERE user_id = $1 AND used_at IS NULL`} {
			if _, err := tx.Exec(ctx, q, userID); err != nil {
				return err
			}
		}
		return forgetDevices(ctx, tx, userID)
	})
	return userID, err
}

// ChangePassword implements auth.UserStore. The account's row is locked
// first, so that a sign-in making a session or a device with the old hash
// either commits before (and is ended here) or finds the hash replaced.
func (s *Store) ChangePassword(ctx context.Context, userID int64, old, hash string, sessionHash, newSessionHash, keepDevice []byte) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var current string
		err := tx.QueryRow(ctx, `SELECT password_hash FROM users WHERE id = $1 FOR NO KEY UPDATE`, userID).Scan(&current)
		if errors.Is(err, pgx.ErrNoRows) {
			return auth.ErrNoUser
		}
		if err == nil && current != old {
			return auth.ErrPasswordChanged
		}
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE sessions SET id_hash = $3, must_change_password = false, legacy_token = false WHERE id_hash = $1 AND user_id = $2`,
			sessionHash, userID, newSessionHash)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return auth.ErrNoSession
		}
		if _, err := tx.Exec(ctx, `UPDATE users SET password_hash = $2, updated_at = now() WHERE id = $1`, userID, hash); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1 AND id_hash <> $2`, userID, newSessionHash); err != nil {
			return err
		}
		if err := stopPasskeysAlone(ctx, tx, userID); err != nil {
			return err
		}
		if err := forgetSecondSteps(ctx, tx, userID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM devices WHERE user_id = $1 AND ($2::bytea IS NULL OR nonce_hash <> $2)`, userID, keepDevice); err != nil {
			return err
		}
		// The device kept is known still, but remembered for the second
		// step no more: a new password ends that, as a reset does.
		if _, err := tx.Exec(ctx, `UPDATE devices SET mfa_remembered_until = NULL WHERE user_id = $1 AND mfa_remembered_until IS NOT NULL`, userID); err != nil {
			return err
		}
		// Reset links mailed before the change (a held sign-in's mail has
		// one, and so do the notices of a new device) are spent with it, as
		// a reset spends every other open token; but for the notices' of a
		// change: how the owner undoes a change they did not make, which
		// whoever made it must not spend by changing the password again.
		if _, err := tx.Exec(ctx, `UPDATE password_reset_tokens SET used_at = now() WHERE user_id = $1 AND used_at IS NULL AND NOT change_notice`, userID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM unlock_tokens WHERE user_id = $1 AND used_at IS NULL`, userID)
		return err
	})
}
