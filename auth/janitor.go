package auth

import (
	"context"
	"time"
)

// janitorInterval is how often expired rows are removed.
const janitorInterval = time.Hour

// runJanitor removes, every janitorInterval and once at start, what no one
// can use any more: expired sessions, reset, unlock and sign-in tokens spent or
// expired for a day, devices unseen for Config.DeviceTTL, second steps
// and passkey ceremonies expired, security events and the records of
// lockouts ended older than Config.EventRetention, and the ids of event batches written a day ago.
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

// sweep runs one round of deletes and returns how many records of each
// kind it removed. A kind that fails is logged and the others still run.
func (s *Service) sweep(ctx context.Context) map[SweepKind]int64 {
	now := s.now()
	removed := map[SweepKind]int64{}
	for _, job := range []struct {
		kind   SweepKind
		before time.Time
	}{
		{SweepSessions, now},
		{SweepResetTokens, now.Add(-24 * time.Hour)},
		{SweepUnlockTokens, now.Add(-24 * time.Hour)},
		{SweepSignInTokens, now.Add(-24 * time.Hour)},
		{SweepDevices, now.Add(-s.cfg.DeviceTTL)},
		{SweepSecurityEvents, now.Add(-s.cfg.EventRetention)},
		// The lockout log's ended records, with the events that tell of
		// them: a lock's account is an address anyone may type, and a
		// flood's locks would otherwise be kept for ever. One in force,
		// or not yet closed by the sweep of lockout ends, is kept.
		{SweepLockouts, now.Add(-s.cfg.EventRetention)},
		// The applications' devices, when the store keeps them: by the same
		// lifetime as XCloak's own.
		{SweepAppDevices, now.Add(-s.cfg.DeviceTTL)},
		// Their accounts' resets, kept while a sign-in decided before one
		// may still be reported (AttemptTTL), and long after.
		{SweepAppResets, now.Add(-24 * time.Hour)},
		// Second steps no code can finish any more, when the store keeps
		// them.
		{SweepMFAChallenges, now},
		// Passkey ceremonies no answer can finish any more, when the
		// store keeps them.
		{SweepCeremonies, now},
		// The ids of event batches written, kept while a batch whose
		// answer was lost may go again, and long after.
		{SweepEventBatches, now.Add(-24 * time.Hour)},
	} {
		if ((job.kind == SweepAppDevices || job.kind == SweepAppResets) && s.apps == nil) ||
			(job.kind == SweepMFAChallenges && s.factors == nil) || (job.kind == SweepCeremonies && s.passkeys == nil) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		n, err := s.store.Sweep(ctx, job.kind, job.before)
		removed[job.kind] += n
		if err != nil && ctx.Err() == nil {
			s.metrics.dbErrors.Inc()
			s.log.WarnContext(ctx, "removing expired rows", "table", string(job.kind), "err", err)
		}
	}
	return removed
}
