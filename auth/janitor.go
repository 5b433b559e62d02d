package auth

import (
	"context"
	"strconv"
	"time"
)

// janitorInterval is how often expired rows are removed.
const janitorInterval = time.Hour

// janitorBatch bounds one DELETE, so that a large backlog never holds long
// locks; the janitor repeats until a batch comes back short.
const janitorBatch = 10_000

// runJanitor removes, every janitorInterval and once at start, what no one
// can use any more: expired sessions, reset and unlock tokens spent or
// expired for a day, devices unseen for Config.DeviceTTL, and security
// events older than Config.EventRetention.
// Every replica runs it; the deletes are idempotent.
func (s *Service) runJanitor(ctx context.Context) {
	t := time.NewTicker(janitorInterval)
	defer t.Stop()
	for {
		s.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep runs one round of deletes and returns how many rows each removed.
func (s *Service) sweep(ctx context.Context) map[string]int64 {
	now := s.now()
	removed := map[string]int64{}
	for _, job := range []struct {
		table, where string
		before       time.Time
	}{
		{"sessions", "expires_at < $1", now},
		{"password_reset_tokens", "coalesce(used_at, expires_at) < $1", now.Add(-24 * time.Hour)},
		{"unlock_tokens", "coalesce(used_at, expires_at) < $1", now.Add(-24 * time.Hour)},
		{"devices", "last_seen_at < $1", now.Add(-s.cfg.DeviceTTL)},
		{"security_events", "at < $1", now.Add(-s.cfg.EventRetention)},
	} {
		for ctx.Err() == nil {
			tag, err := s.db.Exec(ctx, `DELETE FROM `+job.table+` WHERE ctid IN (SELECT ctid FROM `+job.table+
				` WHERE `+job.where+` LIMIT `+strconv.Itoa(janitorBatch)+`)`, job.before)
			if err != nil {
				if ctx.Err() == nil {
					s.metrics.dbErrors.Inc()
					s.log.WarnContext(ctx, "removing expired rows", "table", job.table, "err", err)
				}
				break
			}
			removed[job.table] += tag.RowsAffected()
			if tag.RowsAffected() < janitorBatch {
				break
			}
		}
	}
	return removed
}
