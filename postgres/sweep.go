package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// sweepBatch bounds one DELETE, so that a large backlog never holds long
// locks; Sweep repeats until a batch comes back short.
const sweepBatch = 10_000

// sweepWhere is, for each kind of record, the table that holds it and
// when a record of it is older than $1.
var sweepWhere = map[auth.SweepKind]struct{ table, where string }{
	auth.SweepSessions:       {"sessions", "expires_at < $1"},
	auth.SweepResetTokens:    {"password_reset_tokens", "coalesce(used_at, expires_at) < $1"},
	auth.SweepUnlockTokens:   {"unlock_tokens", "coalesce(used_at, expires_at) < $1"},
	auth.SweepSignInTokens:   {"sign_in_tokens", "coalesce(used_at, expires_at) < $1"},
	auth.SweepDevices:        {"devices", "last_seen_at < $1"},
	auth.SweepAppDevices:     {"app_devices", "last_seen_at < $1"},
	auth.SweepAppResets:      {"app_account_resets", "reset_at < $1"},
	auth.SweepSecurityEvents: {"security_events", "at < $1"},
	auth.SweepMFAChallenges:  {"mfa_challenges", "expires_at < $1"},
	auth.SweepCeremonies:     {"webauthn_ceremonies", "expires_at <= $1"},
	auth.SweepEventBatches:   {"event_batches", "written_at < $1"},
	// Ended, by an unlock (cleared before locked_until) or by its time
	// (cleared at it): locked_until too, so that lockouts_locked_until_idx
	// finds them rather than a scan of the whole log.
	auth.SweepLockouts: {"lockouts", "cleared_at < $1 AND locked_until < $1"},
}

// Sweep implements auth.Sweeper.
func (s *Store) Sweep(ctx context.Context, kind auth.SweepKind, before time.Time) (int64, error) {
	job, ok := sweepWhere[kind]
	if !ok {
		return 0, fmt.Errorf("postgres: no records of kind %q to sweep", kind)
	}
	var removed int64
	for ctx.Err() == nil {
		// Rows another transaction holds (a second step being spent, a
		// sign-in touching its device, another replica's sweep) are
		// skipped, not waited for: they go at a later sweep, and two
		// sweeps taking rows in different orders cannot deadlock.
		tag, err := s.pool.Exec(ctx, `DELETE FROM `+job.table+` WHERE ctid IN (SELECT ctid FROM `+job.table+
			` WHERE `+job.where+` LIMIT `+strconv.Itoa(sweepBatch)+` FOR UPDATE SKIP LOCKED)`, before)
		if err != nil {
			return removed, err
		}
		removed += tag.RowsAffected()
		if tag.RowsAffected() < sweepBatch {
			break
		}
	}
	return removed, nil
}
