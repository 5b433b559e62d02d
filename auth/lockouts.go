package auth

import (
	"context"
	"fmt"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// EventLockoutEnded: a lockout's time ran out (lockout_end.go); an
// early end is EventUnlock or EventUnlockConfirmed instead. Detail
// "until" is when it ended, "level" as EventLockout's.
const EventLockoutEnded = "lockout_ended"

// LockoutExpired is who ended a lockout whose time ran out, as the
// lockout log records it.
const LockoutExpired = "expired"

// Lockout is one recorded account lockout.
type Lockout struct {
	ID          int64
	Account     string
	UserID      int64 // 0 when no account has that identifier
	Level       int
	Failures    int
	LockedAt    time.Time
	LockedUntil time.Time
}

// recordLockout writes the lockout that failure f caused. The lock itself
// lives in Redis and is in force already; exactly one failure per lock
// reaches here, so the row is written once however many failures raced.
func (s *Service) recordLockout(ctx context.Context, email string, userID int64, source string, f ratelimit.Failure) {
	now := s.now()
	err := s.store.RecordLockout(ctx, Lockout{Account: email, UserID: userID, Level: f.Level, Failures: f.Failures,
		LockedAt: now, LockedUntil: now.Add(f.LockedFor)})
	if err != nil {
		s.metrics.dbErrors.Inc()
		s.log.ErrorContext(ctx, "recording lockout", "err", err)
	}
	detail := map[string]string{"level": fmt.Sprint(f.Level), "until": now.Add(f.LockedFor).UTC().Format(time.RFC3339)}
	if app, ok := appOf(email); ok {
		// As the application's other events say whose they are.
		detail["app"] = app
	}
	s.record(Event{Kind: EventLockout, Account: email, UserID: userID, Source: source, Detail: detail})
	s.notifyLockout(email, userID, source, now.Add(f.LockedFor))
}

// clearLockoutRecord marks the account's current lockout as ended and
// records who ended it.
func (s *Service) clearLockoutRecord(ctx context.Context, email string, userID int64, by, source string) {
	if err := s.store.ClearLockout(ctx, email, s.now(), by); err != nil {
		s.metrics.dbErrors.Inc()
		s.log.ErrorContext(ctx, "recording unlock", "err", err)
	}
	s.record(Event{Kind: EventUnlock, Account: email, UserID: userID, Source: source, Detail: map[string]string{"by": by}})
}

// Unlock ends an account's lockout and the lock of its second step, and
// forgets their failures: an administrator's action, recorded with their
// identity in by (for example "admin:ann@example.com" or "cli"). It
// reports whether the account was locked. A lockout that Redis no longer
// holds (Redis restarted) but Postgres still lists is ended too, so the
// dashboard never keeps a row that Unlock cannot remove.
//
// An application's account ("app NAME ACCOUNT", as the dashboard lists
// its lockouts: decisions.go) is unlocked alike.
func (s *Service) Unlock(ctx context.Context, email, by string) (bool, error) {
	app := isAppAccount(email)
	if !app {
		var err error
		if email, err = NormaliseEmail(email); err != nil {
			return false, err
		}
	}
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	wasLocked, err := s.limits.Clear(ctx, RuleLoginAccount, email)
	if err != nil {
		return false, unavailable("clearing lockout", err)
	}
	if !app {
		// The second step's locks too (RuleMFAAccount): the account's own,
		// and those of the codes counted apart from it (heldAccount,
		// passwordlessAccount). Its owner asks for one unlock, whichever
		// of their steps they mistyped.
		for _, id := range [...]string{email, heldAccount(email), passwordlessAccount(email)} {
			locked, err := s.limits.Clear(ctx, RuleMFAAccount, id)
			if err != nil {
				return false, unavailable("clearing second-step lock", err)
			}
			wasLocked = wasLocked || locked
		}
	}
	var userID int64
	if u, err := s.UserByEmail(ctx, email); err == nil && !app {
		userID = u.ID
	}
	listed, err := s.store.LockoutListed(ctx, email, s.now())
	if err != nil {
		return false, s.dbDown("reading lockout", err)
	}
	if wasLocked || listed {
		s.clearLockoutRecord(ctx, email, userID, by, "")
	}
	return wasLocked || listed, nil
}

// ActiveLockouts lists the lockouts in force, newest first, at most limit.
func (s *Service) ActiveLockouts(ctx context.Context, limit int) ([]Lockout, error) {
	out, err := s.store.ActiveLockouts(ctx, s.now(), limit)
	if err != nil {
		return nil, s.dbDown("listing lockouts", err)
	}
	return out, nil
}

// lockoutsInForce lists the account lockouts Postgres records as in force,
// for the in-process limits to honour while Redis is unreachable: at most
// as many as they keep identities, XCloak's own accounts' first
// (LockoutLog.LockoutsToHold).
func (s *Service) lockoutsInForce(ctx context.Context) ([]ratelimit.HeldLock, error) {
	locks, err := s.store.LockoutsToHold(ctx, s.now(), ratelimit.DefaultLocalIdentities)
	if err != nil {
		return nil, s.dbDown("listing lockouts to hold", err)
	}
	held := make([]ratelimit.HeldLock, len(locks))
	for i, l := range locks {
		held[i] = ratelimit.HeldLock{Name: RuleLoginAccount, ID: l.Account, Since: l.LockedAt, Until: l.LockedUntil, Level: l.Level}
	}
	return held, nil
}
