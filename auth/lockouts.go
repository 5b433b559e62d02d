package auth

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// EventLockoutEnded: a lockout's time ran out (lockout_end.go); an
// early end is EventUnlock instead (an unlock link's EventUnlockConfirmed
// makes its browser a known device and leaves the lock in force). Detail
// "until" is when it ended, "level" as EventLockout's.
const EventLockoutEnded = "lockout_ended"

// LockoutExpired is who ended a lockout whose time ran out, as the
// lockout log records it.
const LockoutExpired = "expired"

// Lockout is one recorded account lockout.
type Lockout struct {
	ID      int64
	Account string
	UserID  int64 // 0 when no account has that identifier
	// Step is "" for a password's lockout; for the lock of the account's
	// second step, whose codes locked it (SecondStepOwn, SecondStepHeld,
	// SecondStepPasskey), as ActiveLockouts and UserDetail say. The log
	// stores it in the key (secondStepLockKey).
	Step        string
	Level       int
	Failures    int
	LockedAt    time.Time
	LockedUntil time.Time
}

// The second step's locks, by whose codes locked them: each is a count
// of its own (admitCode), and ends apart from the others.
const (
	SecondStepOwn     = "own"     // the account's second step, after its password
	SecondStepHeld    = "held"    // a held answer's codes (heldAccount)
	SecondStepPasskey = "passkey" // passkeys tried alone (passwordlessAccount)
)

// SecondStepLockPrefix begins the lockout log's key of a second step's
// lock: "mfa ADDRESS", "mfa held ADDRESS" or "mfa passkey ADDRESS"
// (secondStepLockKey). Kept under keys of their own, they are apart from
// the password's lockouts, which the replicas hold while Redis is away
// (LockoutLog.LockoutsToHold leaves them out): a replica of an earlier
// version, which reads every row as a password's lockout, holds one only
// as the lock of an account no one signs in as.
const SecondStepLockPrefix = "mfa "

// secondStepLockKey is the lockout log's key of the second step's lock
// counted as id: the account's address, heldAccount's or
// passwordlessAccount's.
func secondStepLockKey(id string) string { return SecondStepLockPrefix + id }

// listed is l as the dashboard lists it: a second step's lock under its
// account's address, with its Step.
func (l Lockout) listed() Lockout {
	id, ok := strings.CutPrefix(l.Account, SecondStepLockPrefix)
	if !ok {
		return l
	}
	l.Account, l.Step = id, SecondStepOwn
	if a, ok := strings.CutPrefix(id, heldAccountPrefix); ok {
		l.Account, l.Step = a, SecondStepHeld
	} else if a, ok := strings.CutPrefix(id, passwordlessAccountPrefix); ok {
		l.Account, l.Step = a, SecondStepPasskey
	}
	return l
}

// recordLockout writes the lockout that failure f caused. The lock itself
// lives in Redis and is in force already; exactly one failure per lock
// reaches here, so the row is written once however many failures raced.
// detail is the event's own (an application's, appDetail), or nil.
func (s *Service) recordLockout(ctx context.Context, email string, userID int64, source string, f ratelimit.Failure, detail map[string]string) {
	now := s.now()
	err := s.store.RecordLockout(ctx, Lockout{Account: email, UserID: userID, Level: f.Level, Failures: f.Failures,
		LockedAt: now, LockedUntil: now.Add(f.LockedFor)})
	if err != nil {
		s.metrics.dbErrors.Inc()
		s.log.ErrorContext(ctx, "recording lockout", "err", err)
	}
	if detail == nil {
		detail = map[string]string{}
	}
	detail["level"], detail["until"] = fmt.Sprint(f.Level), now.Add(f.LockedFor).UTC().Format(time.RFC3339)
	s.record(Event{Kind: EventLockout, Account: email, UserID: userID, Source: source, Detail: detail})
	s.notifyLockout(email, userID, source, now.Add(f.LockedFor))
}

// recordSecondStepLockout writes the lock of a second step that failure
// f of the codes counted as id (admitCode) caused, so that the dashboard
// lists it beside the password's lockouts and an administrator can end
// it (Unlock). A held answer's lock is anyone's doing who had the
// account's address, so its row is not the owner's (no user ID), as its
// events are not (codeEvent). Its event is the caller's. The writes of
// the lock's row detached before it (recordHeldLockout, and the end a
// right code's lift writes) are written first.
func (s *Service) recordSecondStepLockout(ctx context.Context, id string, user User, held bool, f ratelimit.Failure) {
	key := secondStepLockKey(id)
	s.detached.settle(key)
	s.writeSecondStepLockout(ctx, key, user, held, f, s.now())
}

// recordHeldLockout is recordSecondStepLockout for a lock that a held
// token's code reached (admitCode, countHeldCodeAsOwn), detached from the
// request, as of now: a held answer's code must take as long whatever its
// password was, and a right password's token reaches one lock more (the
// owner's own step's) than a wrong one's, whose row, written before the
// answer, would show in its time.
func (s *Service) recordHeldLockout(ctx context.Context, id string, user User, held bool, f ratelimit.Failure) {
	key, now := secondStepLockKey(id), s.now()
	s.detach(ctx, key, func(ctx context.Context) { s.writeSecondStepLockout(ctx, key, user, held, f, now) })
}

// writeSecondStepLockout writes the row of a second step's lock under key
// that failure f caused at now.
func (s *Service) writeSecondStepLockout(ctx context.Context, key string, user User, held bool, f ratelimit.Failure, now time.Time) {
	userID := user.ID
	if held {
		userID = 0
	}
	err := s.store.RecordLockout(ctx, Lockout{Account: key, UserID: userID, Level: f.Level, Failures: f.Failures,
		LockedAt: now, LockedUntil: now.Add(f.LockedFor)})
	if err != nil {
		s.metrics.dbErrors.Inc()
		s.log.ErrorContext(ctx, "recording second-step lockout", "err", err)
	}
}

// clearLockoutRecord marks the account's current lockout as ended and
// records who ended it.
func (s *Service) clearLockoutRecord(ctx context.Context, email string, userID int64, by, source string) {
	s.clearLockoutRows(ctx, by, email)
	s.record(Event{Kind: EventUnlock, Account: email, UserID: userID, Source: source, Detail: map[string]string{"by": by}})
}

// clearLockoutRows marks the lockouts in force under keys as ended by by:
// each key whatever became of the others', so that a failure leaves no
// more listed than it must.
func (s *Service) clearLockoutRows(ctx context.Context, by string, keys ...string) {
	for _, key := range keys {
		if err := s.store.ClearLockout(ctx, key, s.now(), by); err != nil {
			s.metrics.dbErrors.Inc()
			s.log.ErrorContext(ctx, "recording unlock", "err", err)
		}
	}
}

// accountLock is one of an account's locks: its rule's identity in the
// limits and its key in the lockout log.
type accountLock struct {
	step     string // Lockout.Step
	rule, id string
}

// locksOf lists the locks of account, the password's first: an
// application's account has that alone.
func locksOf(account string) []accountLock {
	locks := []accountLock{{"", RuleLoginAccount, account}}
	if isAppAccount(account) {
		return locks
	}
	return append(locks,
		accountLock{SecondStepOwn, RuleMFAAccount, account},
		accountLock{SecondStepPasskey, RuleMFAAccount, passwordlessAccount(account)},
		accountLock{SecondStepHeld, RuleMFAAccount, heldAccount(account)})
}

// key is the lock's key in the lockout log.
func (l accountLock) key() string {
	if l.rule == RuleMFAAccount {
		return secondStepLockKey(l.id)
	}
	return l.id
}

// Unlock ends an account's lockout and the locks of its second step, and
// forgets their failures: an administrator's action, recorded with their
// identity in by (for example "admin:ann@example.com" or "cli"). It
// reports whether the account was locked. A lockout that Redis no longer
// holds (Redis restarted) but Postgres still lists is ended too, so the
// dashboard never keeps a row that Unlock cannot remove. Its owner asks
// for one unlock, whichever of their steps they mistyped.
//
// An application's account ("app NAME ACCOUNT", as the dashboard lists
// its lockouts: decisions.go) is unlocked alike.
func (s *Service) Unlock(ctx context.Context, email, by string) (bool, error) {
	return s.unlock(ctx, email, by, func(accountLock) bool { return true })
}

// UnlockStep ends one of an account's locks, as the dashboard lists them
// apart: its password's lockout (step "") or one of its second step's
// (Lockout.Step). So an administrator lifts a lock strangers caused (a
// held answer's) without lifting a password's lockout they may have
// caused too. ErrNoSuchLock for a step the account has no lock of.
func (s *Service) UnlockStep(ctx context.Context, email, step, by string) (bool, error) {
	known := false
	for _, l := range locksOf(email) {
		known = known || l.step == step
	}
	if !known {
		return false, ErrNoSuchLock
	}
	return s.unlock(ctx, email, by, func(l accountLock) bool { return l.step == step })
}

// ErrNoSuchLock: UnlockStep was named a lock no account has.
var ErrNoSuchLock = &FieldError{"lock", "is not a lock of the account"}

// unlock ends the locks of account that which picks.
func (s *Service) unlock(ctx context.Context, email, by string, which func(accountLock) bool) (bool, error) {
	if !isAppAccount(email) {
		var err error
		if email, err = NormaliseEmail(email); err != nil {
			return false, err
		}
	}
	locks := slices.DeleteFunc(locksOf(email), func(l accountLock) bool { return !which(l) })
	keys := make([]string, len(locks))
	for i, l := range locks {
		keys[i] = l.key()
	}
	// The rows of locks a held token's code reached are written past its
	// answer (recordHeldLockout): those begun are in the log before it is
	// read, and the unlock's time counts from then.
	s.detached.settle(keys...)
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	wasLocked, listed := false, false
	for i, l := range locks {
		locked, err := s.limits.Clear(ctx, l.rule, l.id)
		if err != nil {
			return false, unavailable("clearing lockout", err)
		}
		inLog, err := s.store.LockoutListed(ctx, keys[i], s.now())
		if err != nil {
			return false, s.dbDown("reading lockout", err)
		}
		wasLocked, listed = wasLocked || locked, listed || inLog
	}
	if !wasLocked && !listed {
		return false, nil
	}
	var userID int64
	if u, err := s.UserByEmail(ctx, email); err == nil && !isAppAccount(email) {
		userID = u.ID
	}
	s.clearLockoutRows(ctx, by, keys...)
	detail := map[string]string{"by": by}
	if len(locks) == 1 && locks[0].step != "" {
		// One of the second step's locks alone.
		detail["step"] = locks[0].step
	}
	s.record(Event{Kind: EventUnlock, Account: email, UserID: userID, Detail: detail})
	return true, nil
}

// ActiveLockouts lists the lockouts in force, newest first, at most limit:
// each account's password lockout and each of its second step's locks
// (Lockout.Step).
func (s *Service) ActiveLockouts(ctx context.Context, limit int) ([]Lockout, error) {
	out, err := s.store.ActiveLockouts(ctx, s.now(), limit)
	if err != nil {
		return nil, s.dbDown("listing lockouts", err)
	}
	for i := range out {
		out[i] = out[i].listed()
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
