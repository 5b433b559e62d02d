package postgres

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
)

// SearchUsers implements auth.UserAdminStore. The prefix is a range of
// users_email_c_idx (migration 00010), which also gives the page's order,
// so a page reads limit index entries whatever the number of accounts.
// The range is written out rather than as LIKE, so that it holds in a
// generic plan of the prepared statement too, and no character of the
// prefix is a pattern.
func (s *Store) SearchUsers(ctx context.Context, prefix, after string, limit int) ([]auth.User, error) {
	sql, args := searchUsersQuery(prefix, after, limit)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (auth.User, error) { return scanUser(row) })
}

// searchUsersQuery is the SQL and arguments of SearchUsers. Two
// statements rather than one with an optional bound: a bound that may be
// NULL is no index condition in a generic plan, and a rare prefix would
// then read every index entry after it.
func searchUsersQuery(prefix, after string, limit int) (string, []any) {
	if end, ok := prefixEnd(prefix); ok {
		return `SELECT ` + userColumns + ` FROM users
			WHERE email COLLATE "C" >= $1 AND email COLLATE "C" > $2 AND email COLLATE "C" < $4
			ORDER BY email COLLATE "C" LIMIT $3`, []any{prefix, after, limit, end}
	}
	return `SELECT ` + userColumns + ` FROM users
		WHERE email COLLATE "C" >= $1 AND email COLLATE "C" > $2
		ORDER BY email COLLATE "C" LIMIT $3`, []any{prefix, after, limit}
}

// prefixEnd returns the least string greater than every string that
// starts with prefix, in byte order: prefix with its last character
// replaced by the next one (characters that have no next one are dropped
// first). False when there is none: every string is then at most the
// prefix's successor ("" or only U+10FFFF).
func prefixEnd(prefix string) (string, bool) {
	for prefix != "" {
		r, size := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-size]
		next := r + 1
		if next == 0xD800 {
			// Surrogates are no characters: the next one is past them.
			next = 0xE000
		}
		if next <= utf8.MaxRune {
			return prefix + string(next), true
		}
	}
	return "", false
}

// UserByID implements auth.UserAdminStore.
func (s *Store) UserByID(ctx context.Context, id int64) (auth.User, error) {
	return scanUser(s.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id))
}

// roleLock is the transaction-level advisory lock every change that can
// take away an enabled administrator holds (disabling, demoting,
// deleting): under it, the count of the others is the count at commit,
// so two administrators demoting each other at once cannot both pass.
// The number is arbitrary, XCloak's own.
const roleLock = 0x78636c6b_00000010

// withAdminCheck runs change on account id in a transaction that holds
// roleLock and the account's row, after refusing with ErrLastAdmin when
// the account is an enabled administrator and takesAdmin and no other
// enabled administrator exists. ErrNoUser if there is no such account.
func (s *Store) withAdminCheck(ctx context.Context, id int64, takesAdmin bool, change func(tx pgx.Tx, u auth.User) (auth.User, error)) (auth.User, error) {
	var out auth.User
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(roleLock)); err != nil {
			return err
		}
		u, err := scanUser(tx.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1 FOR NO KEY UPDATE`, id))
		if err != nil {
			return err
		}
		if takesAdmin && u.IsAdmin && !u.Disabled() {
			var others bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE is_admin AND disabled_at IS NULL AND id <> $1)`, id).Scan(&others); err != nil {
				return err
			}
			if !others {
				return auth.ErrLastAdmin
			}
		}
		out, err = change(tx, u)
		return err
	})
	return out, err
}

// DisableUser implements auth.UserAdminStore. The account's row is locked
// as a password replacement locks it, so a sign-in making a session at
// the same moment either commits first (and its session is ended here)
// or finds the account disabled (CreateSession).
func (s *Store) DisableUser(ctx context.Context, id int64, at time.Time) (auth.User, error) {
	return s.withAdminCheck(ctx, id, true, func(tx pgx.Tx, _ auth.User) (auth.User, error) {
		// A sign-out counted, as "sign out everywhere" counts one: a
		// sign-in under way (a held second step, a session or link about
		// to be made) was checked against the count it read, and ends
		// here rather than live on once the account is enabled again.
		u, err := scanUser(tx.QueryRow(ctx, `UPDATE users SET disabled_at = coalesce(disabled_at, $2),
			sign_outs = sign_outs + 1, updated_at = now()
			WHERE id = $1 RETURNING `+userColumns, id, at))
		if err != nil {
			return auth.User{}, err
		}
		// Its sessions, and its pending second steps, each of which would
		// otherwise check a code (and spend a recovery code) for it.
		for _, q := range []string{
			`DELETE FROM sessions WHERE user_id = $1`,
			`DELETE FROM mfa_challenges WHERE user_id = $1`,
		} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return auth.User{}, err
			}
		}
		for _, q := range []string{
			`UPDATE password_reset_tokens SET used_at = $2 WHERE user_id = $1 AND used_at IS NULL`,
			`UPDATE sign_in_tokens SET used_at = $2 WHERE user_id = $1 AND used_at IS NULL`,
		} {
			if _, err := tx.Exec(ctx, q, id, at); err != nil {
				return auth.User{}, err
			}
		}
		return u, forgetDevices(ctx, tx, id)
	})
}

// EnableUser implements auth.UserAdminStore.
func (s *Store) EnableUser(ctx context.Context, id int64) (auth.User, error) {
	return scanUser(s.pool.QueryRow(ctx, `UPDATE users SET disabled_at = NULL, updated_at = now()
		WHERE id = $1 RETURNING `+userColumns, id))
}

// SetUserAdmin implements auth.UserAdminStore.
func (s *Store) SetUserAdmin(ctx context.Context, id int64, admin bool) (auth.User, error) {
	return s.withAdminCheck(ctx, id, !admin, func(tx pgx.Tx, _ auth.User) (auth.User, error) {
		return scanUser(tx.QueryRow(ctx, `UPDATE users SET is_admin = $2, updated_at = now()
			WHERE id = $1 RETURNING `+userColumns, id, admin))
	})
}

// DeleteUser implements auth.UserAdminStore. Sessions, devices and
// tokens go with the account (ON DELETE CASCADE); lockout records keep
// their account key and lose the id (ON DELETE SET NULL); security events
// have no key to the account and stay as they are, naming its email.
func (s *Store) DeleteUser(ctx context.Context, id int64) (auth.User, error) {
	return s.withAdminCheck(ctx, id, true, func(tx pgx.Tx, u auth.User) (auth.User, error) {
		tag, err := tx.Exec(ctx, `DELETE FROM users WHERE id = $1`, id)
		if err == nil && tag.RowsAffected() == 0 {
			err = auth.ErrNoUser
		}
		return u, err
	})
}

// CountSessions implements auth.UserAdminStore.
func (s *Store) CountSessions(ctx context.Context, userID int64, now, usedAfter, createdAfter time.Time) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE user_id = $1 AND expires_at > $2
		AND ($3::timestamptz IS NULL OR last_seen_at > $3) AND created_at > $4`, userID, now, orNull(usedAfter), createdAfter).Scan(&n)
	return n, err
}

// AccountLockout implements auth.UserAdminStore.
func (s *Store) AccountLockout(ctx context.Context, account string, now time.Time) (auth.Lockout, bool, error) {
	var l auth.Lockout
	err := s.pool.QueryRow(ctx, `
		SELECT id, account_key, coalesce(user_id, 0), level, failures, locked_at, locked_until FROM lockouts
		WHERE account_key = $1 AND cleared_at IS NULL AND locked_until > $2
		ORDER BY locked_at DESC, id DESC LIMIT 1`, account, now).
		Scan(&l.ID, &l.Account, &l.UserID, &l.Level, &l.Failures, &l.LockedAt, &l.LockedUntil)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.Lockout{}, false, nil
	}
	return l, err == nil, err
}

var _ auth.UserAdminStore = (*Store)(nil)
