package dashboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/ratelimit"
)

// Bounds of what the dashboard shows.
const (
	// TopN is how many sources and accounts each ranking lists.
	TopN = 10
	// LockoutsListed is how many active lockouts the dashboard lists;
	// Summary.ActiveLockouts counts them all.
	LockoutsListed = 100
	// MaxEventsPage bounds one page of Events.
	MaxEventsPage = 100
)

// Dashboard is everything the security dashboard shows about a period,
// from the stores every replica shares: counters from Redis, lockouts from
// Postgres.
type Dashboard struct {
	Snapshot
	// AsOf is when the figures were read.
	AsOf time.Time
	// Lockouts are the lockouts in force, newest first, at most
	// LockoutsListed (Summary.ActiveLockouts counts them all).
	Lockouts []auth.Lockout
	// Degraded reports that Redis is unreachable and limits follow
	// FailurePolicy.
	Degraded      bool
	FailurePolicy string
	// CountersUnavailable reports that the counters could not be read
	// (Redis is down); the figures are then zero, and the lockouts and
	// events from Postgres are still shown.
	CountersUnavailable bool
	// Attack is attack mode and the attack panel's figures; zero when
	// CountersUnavailable.
	Attack Attack
}

// Counters are the shared counters the figures are read from (package
// counters keeps them in Redis).
type Counters interface {
	// Snapshot returns the summary of p, the chart's series and both
	// rankings (topN each); the rankings may be a few seconds behind the
	// summary in the current minute (counters.Stats).
	Snapshot(ctx context.Context, p Period, now time.Time, topN int) (Snapshot, error)
}

// Store is where the security events and the lockout log are kept
// (package postgres).
type Store interface {
	// Events lists a page of stored events; f is valid and names its kinds.
	Events(ctx context.Context, f EventFilter) ([]StoredEvent, error)
	// SearchEvents calls fn with each event q selects, newest first; q is
	// valid.
	SearchEvents(ctx context.Context, q EventSearch, fn func(StoredEvent) error) error
	// CountActiveLockouts counts the accounts locked at now.
	CountActiveLockouts(ctx context.Context, now time.Time) (int, error)
	// CountFactorAccounts counts the accounts, and those with a confirmed
	// second factor.
	CountFactorAccounts(ctx context.Context) (accounts, withFactor int64, err error)
}

// Accounts is what the dashboard asks of the service that guards them
// (auth.Service).
type Accounts interface {
	// ActiveLockouts lists the lockouts in force, newest first.
	ActiveLockouts(ctx context.Context, limit int) ([]auth.Lockout, error)
	// Degraded reports whether Redis is unreachable.
	Degraded() bool
	// FailurePolicy is what limits do while it is.
	FailurePolicy() ratelimit.FailurePolicy
}

// Reader reads the dashboard's data from the stores every replica shares.
type Reader struct {
	counters Counters
	attack   AttackWatch
	store    Store
	accounts Accounts
	now      func() time.Time
	log      *slog.Logger
	// searchTimeout bounds one search's page (searchTimeout in search.go).
	searchTimeout time.Duration
	// searches holds a place for each search or export running
	// (StartSearch).
	searches chan struct{}
	// accountFigures are the account figures counted last (accounts.go),
	// lockoutFigures the lockouts in force read last (lockouts.go).
	accountFigures *accountFigures
	lockoutFigures *lockoutFigures
}

// New returns a Reader; now is its clock (nil: time.Now), log where it
// notes counters it could not read (nil: nowhere). w is attack mode (nil:
// never on, and it cannot be switched).
func New(c Counters, s Store, a Accounts, w AttackWatch, now func() time.Time, log *slog.Logger) *Reader {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reader{counters: c, attack: w, store: s, accounts: a, now: now, log: log, searchTimeout: searchTimeout,
		searches: make(chan struct{}, defaultSearches), accountFigures: newAccountFigures(),
		lockoutFigures: newLockoutFigures()}
}

// Dashboard gathers the figures of period p as of now.
func (r *Reader) Dashboard(ctx context.Context, p Period) (Dashboard, error) {
	if !p.Valid() {
		return Dashboard{}, ErrInvalidPeriod
	}
	now := r.now()
	d := Dashboard{AsOf: now, Degraded: r.accounts.Degraded(), FailurePolicy: string(r.accounts.FailurePolicy())}
	snap, err := r.counters.Snapshot(ctx, p, now, TopN)
	if err != nil {
		// Without Redis the team still needs the lockouts and events.
		r.log.WarnContext(ctx, "dashboard: reading counters", "err", err)
		d.CountersUnavailable = true
		snap = Snapshot{Summary: Summary{Period: p, RejectedByRule: map[string]int64{}}}
	}
	d.Snapshot = snap
	if r.attack != nil && !d.CountersUnavailable {
		if d.Attack, err = r.attack.AttackStatus(ctx, now); err != nil {
			r.log.WarnContext(ctx, "dashboard: reading attack mode", "err", err)
			d.CountersUnavailable = true
		}
	}
	if r.attack != nil && d.CountersUnavailable {
		// Without Redis, attack mode as this replica holds it (new
		// browsers are held by it or not): on or off, since and trigger
		// unknown.
		d.Attack = Attack{Active: r.attack.Active()}
	}
	if d.Lockouts, d.Summary.ActiveLockouts, err = r.lockouts(ctx); err != nil {
		return Dashboard{}, err
	}
	if d.Summary.Accounts, d.Summary.AccountsWithFactor, err = r.countAccounts(ctx); err != nil {
		return Dashboard{}, err
	}
	return d, nil
}

// EventKinds are the events the dashboard lists: what a security
// team acts on, not the flood of individual sign-ins that the counters
// already sum up. Every administrator's act is among them: an account
// made, promoted or given a password, a key made, are what a team looks
// for after a break-in.
var EventKinds = []string{auth.EventLockout, auth.EventLockoutEnded, auth.EventUnlock, auth.EventResetRequested, auth.EventResetCompleted, auth.EventNewDevice,
	auth.EventUnlockConfirmed, auth.EventSignedOutEverywhere,
	auth.EventPasswordChanged, auth.EventAttackStarted, auth.EventAttackEnded, auth.EventAttackSwitched,
	auth.EventVerificationRequired, auth.EventVerificationConfirmed, auth.EventNewDeviceSignedOut,
	auth.EventSessionEnded, auth.EventDeviceForgotten,
	auth.EventFactorAdded, auth.EventFactorRemoved, auth.EventRecoveryCodesRegenerated, auth.EventMFALockout,
	auth.EventUserCreated, auth.EventUserDisabled, auth.EventUserEnabled, auth.EventUserDeleted, auth.EventUserPromoted,
	auth.EventUserDemoted, auth.EventPasswordSet, auth.EventAPIKeyCreated, auth.EventAPIKeyRevoked,
	auth.EventEventsExported}

// ErrNoAttackWatch: attack mode cannot be switched, the Reader having no
// AttackWatch.
var ErrNoAttackWatch = errors.New("dashboard: attack mode is not watched")

// SwitchAttack turns attack mode on or off in an administrator's name
// (by); it reports whether that changed anything.
func (r *Reader) SwitchAttack(ctx context.Context, on bool, by string) (bool, error) {
	if r.attack == nil {
		return false, ErrNoAttackWatch
	}
	return r.attack.SwitchAttack(ctx, on, by)
}

// EventFilter selects a page of stored security events.
type EventFilter struct {
	// Kinds are the event kinds to list; empty means EventKinds.
	Kinds []string
	// BeforeID continues a listing after the event with that ID (the last
	// one of the previous page); 0 starts with the newest.
	BeforeID int64
	// Limit is the page size, 1 to MaxEventsPage.
	Limit int
}

// StoredEvent is one security event as Postgres keeps it.
type StoredEvent struct {
	ID      int64
	At      time.Time
	Kind    string
	Account string // "" if none
	UserID  int64  // 0 if no account
	Source  string // "" if none
	Detail  map[string]string
}

// Events lists security events newest first (by time, then ID), one page
// at a time: pass the last ID of a page as BeforeID for the next. The
// listing is by key, not offset, so a page costs the same however deep it
// is and new events do not shift later pages.
func (r *Reader) Events(ctx context.Context, f EventFilter) ([]StoredEvent, error) {
	if f.Limit < 1 || f.Limit > MaxEventsPage || f.BeforeID < 0 {
		return nil, fmt.Errorf("%w: events page of %d from %d", auth.ErrInvalidRequest, f.Limit, f.BeforeID)
	}
	if len(f.Kinds) == 0 {
		f.Kinds = EventKinds
	}
	return r.store.Events(ctx, f)
}
