package auth

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// lockoutEndInterval is how often the lockouts whose time ran out are
// looked for: a lockout_ended event comes at most this late, after
// lockoutEndGrace.
const lockoutEndInterval = 15 * time.Second

// lockoutEndBatch bounds the lockouts one call ends.
const lockoutEndBatch = 1000

// lockoutEndGrace is how long after a lockout's time ran out the sweep
// leaves it to an unlock that read the clock before that and reaches
// Postgres after (a busy pool, a pause, a replica's clock a little
// behind): the unlock ends it early, as account.unlocked, rather than
// both it and the sweep telling of its end.
const lockoutEndGrace = 5 * time.Second

// lockoutEndHorizon is how long after a lockout's time ran out its
// lockout_ended is still recorded. Older ones are closed without an
// event: history found by the first sweep after the upgrade that brought
// it, or after every replica (or Postgres) was down this long. Recorded,
// such a backlog would fill the event queue in one go, dropping the
// events of sign-ins made meanwhile, and tell receivers of ends of
// lockouts whose start they never heard.
const lockoutEndHorizon = time.Hour

// runLockoutEnds records, every lockoutEndInterval until ctx is done, the
// lockouts whose time ran out. Every replica runs it; the lockout log
// hands each lockout to one of them (LockoutLog.EndLockouts), so each
// ending is recorded once.
func (s *Service) runLockoutEnds(ctx context.Context) {
	t := time.NewTicker(lockoutEndInterval)
	defer t.Stop()
	for {
		if _, err := s.endLockouts(ctx); err != nil && ctx.Err() == nil {
			s.metrics.dbErrors.Inc()
			s.log.WarnContext(ctx, "recording lockouts that ended", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// endLockouts closes each lockout whose time ran out, records an
// EventLockoutEnded for those that ran out within lockoutEndHorizon, and
// returns how many it closed.
func (s *Service) endLockouts(ctx context.Context) (int, error) {
	total := 0
	for {
		now := s.now()
		ended, err := s.store.EndLockouts(ctx, now.Add(-lockoutEndGrace), lockoutEndBatch)
		for _, l := range ended {
			if now.Sub(l.LockedUntil) > lockoutEndHorizon || strings.HasPrefix(l.Account, SecondStepLockPrefix) {
				// A second step's lock began with no EventLockout (its
				// event is EventMFALockout, which says until when), so
				// it ends with no EventLockoutEnded, whose webhook
				// follows a lockout.started.
				continue
			}
			detail := map[string]string{"level": fmt.Sprint(l.Level), "until": l.LockedUntil.UTC().Format(time.RFC3339)}
			if app, ok := appOf(l.Account); ok {
				detail["app"] = app
			}
			s.record(Event{At: l.LockedUntil, Kind: EventLockoutEnded, Account: l.Account, UserID: l.UserID, Detail: detail})
		}
		total += len(ended)
		if err != nil || len(ended) < lockoutEndBatch {
			return total, err
		}
	}
}
