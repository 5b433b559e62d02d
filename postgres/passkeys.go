package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/xcloak/xcloak/auth"
)

var _ auth.PasskeyStore = (*Store)(nil)

// WebAuthnHandle implements auth.PasskeyStore: the handle is set once,
// so two first registrations racing read the same.
func (s *Store) WebAuthnHandle(ctx context.Context, userID int64, fresh []byte) ([]byte, error) {
	var handle []byte
	err := s.pool.QueryRow(ctx, `UPDATE users SET webauthn_handle = COALESCE(webauthn_handle, $2) WHERE id = $1
		RETURNING webauthn_handle`, userID, fresh).Scan(&handle)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, auth.ErrNoUser
	}
	return handle, err
}

const passkeyColumns = `f.id, f.user_id, f.name, u.webauthn_handle, u.email, f.credential_id, f.secret, f.sign_count, f.transports,
	f.aaguid, f.attestation_type, f.user_verified, f.backup_eligible, f.backup_state, f.signs_in_alone, f.created_at, f.last_used_at`

func scanPasskey(row pgx.Row) (auth.Passkey, error) {
	var p auth.Passkey
	var count int64
	var used *time.Time
	err := row.Scan(&p.ID, &p.UserID, &p.Name, &p.Handle, &p.Email, &p.CredentialID, &p.PublicKey, &count, &p.Transports,
		&p.AAGUID, &p.AttestationType, &p.UserVerified, &p.BackupEligible, &p.BackupState, &p.SignsInAlone, &p.CreatedAt, &used)
	p.SignCount = uint32(count)
	if used != nil {
		p.LastUsedAt = *used
	}
	return p, err
}

// Passkeys implements auth.PasskeyStore.
func (s *Store) Passkeys(ctx context.Context, userID int64) ([]auth.Passkey, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+passkeyColumns+` FROM second_factors f JOIN users u ON u.id = f.user_id
		WHERE f.user_id = $1 AND f.kind = 'webauthn' AND f.confirmed_at IS NOT NULL ORDER BY f.created_at, f.id`, userID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (auth.Passkey, error) { return scanPasskey(r) })
}

// PasskeyByCredential implements auth.PasskeyStore.
func (s *Store) PasskeyByCredential(ctx context.Context, id []byte) (auth.Passkey, error) {
	p, err := scanPasskey(s.pool.QueryRow(ctx, `SELECT `+passkeyColumns+` FROM second_factors f JOIN users u ON u.id = f.user_id
		WHERE f.credential_id = $1 AND f.kind = 'webauthn' AND f.confirmed_at IS NOT NULL`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.Passkey{}, auth.ErrNoFactor
	}
	return p, err
}

// AddPasskey implements auth.PasskeyStore.
func (s *Store) AddPasskey(ctx context.Context, p auth.Passkey, recovery [][]byte, at time.Time, v auth.Verified) (id int64, codes bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		first, err := lockForFirstFactor(ctx, tx, p.UserID, v)
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `INSERT INTO second_factors (user_id, kind, name, secret, created_at, confirmed_at,
			credential_id, sign_count, transports, aaguid, attestation_type, user_verified, backup_eligible, backup_state)
			VALUES ($1, 'webauthn', $2, $3, $4, $4, $5, $6, COALESCE($7::text[], '{}'), $8, $9, $10, $11, $12) RETURNING id`,
			p.UserID, p.Name, p.PublicKey, at, p.CredentialID, int64(p.SignCount), p.Transports, p.AAGUID,
			p.AttestationType, p.UserVerified, p.BackupEligible, p.BackupState).Scan(&id)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "second_factors_credential_id_idx" {
			return auth.ErrPasskeyExists
		}
		if err != nil {
			return err
		}
		if err := withinFactorBound(ctx, tx, p.UserID); err != nil || recovery == nil || !first {
			return err
		}
		codes = true
		return replaceRecoveryCodes(ctx, tx, p.UserID, recovery, at)
	})
	return id, codes && err == nil, err
}

// UsePasskey implements auth.PasskeyStore: one conditional UPDATE, so of
// two assertions with one counter, one finds it used. After a password,
// the account's row is read first, shared: a new password being stored
// (which takes it exclusively, and stops the passkeys signing in alone)
// is then either all before this, and its hash is read, or all after.
func (s *Store) UsePasskey(ctx context.Context, id int64, count uint32, backup bool, password string, at time.Time) (bool, error) {
	const use = `UPDATE second_factors SET sign_count = $2, backup_state = $3, last_used_at = $4,
			signs_in_alone = signs_in_alone OR $5
		WHERE id = $1 AND kind = 'webauthn' AND (sign_count < $2 OR ($2 = 0 AND sign_count = 0))`
	if password == "" {
		tag, err := s.pool.Exec(ctx, use, id, int64(count), backup, at, false)
		if err != nil {
			return false, err
		}
		return tag.RowsAffected() == 1, nil
	}
	var used bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var current string
		err := tx.QueryRow(ctx, `SELECT u.password_hash FROM users u JOIN second_factors f ON f.user_id = u.id
			WHERE f.id = $1 FOR SHARE OF u`, id).Scan(&current)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		tag, err := tx.Exec(ctx, use, id, int64(count), backup, at, current == password)
		used = tag.RowsAffected() == 1
		return err
	})
	return used, err
}

// AddCeremony implements auth.PasskeyStore.
func (s *Store) AddCeremony(ctx context.Context, c auth.Ceremony) error {
	var userID *int64
	if c.UserID != 0 {
		userID = &c.UserID
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO webauthn_ceremonies (binding_hash, purpose, user_id, mfa_token_hash, session, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, c.BindingHash, c.Purpose, userID, c.MFATokenHash, c.Session, c.ExpiresAt)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" && pgErr.ConstraintName == "webauthn_ceremonies_user_id_fkey" {
		// The account was deleted since it was read.
		return auth.ErrNoUser
	}
	return err
}

// TakeCeremony implements auth.PasskeyStore: DELETE ... RETURNING, so of
// two responses one gets the challenge.
func (s *Store) TakeCeremony(ctx context.Context, bindingHash []byte, purpose string, now time.Time) (auth.Ceremony, error) {
	c := auth.Ceremony{BindingHash: bindingHash, Purpose: purpose}
	var userID *int64
	err := s.pool.QueryRow(ctx, `DELETE FROM webauthn_ceremonies WHERE binding_hash = $1 AND purpose = $2 AND expires_at > $3
		RETURNING user_id, mfa_token_hash, session, expires_at`, bindingHash, purpose, now).
		Scan(&userID, &c.MFATokenHash, &c.Session, &c.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.Ceremony{}, auth.ErrInvalidToken
	}
	if userID != nil {
		c.UserID = *userID
	}
	return c, err
}
