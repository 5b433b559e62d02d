package dashboard

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// lockoutReuse is how many times its reading time a replica reuses what
// it read of the lockouts in force: their latest LockoutsListed and their
// count, each over every lockout in force, tens of thousands under a large
// attack (about 95 ms each for 100,000 on a 2-core host). The live
// dashboard reads them every second for each period watched, on every
// replica: read each time, they would take a fifth of a database core per
// replica while the database is busiest. Reused so, a read of a few
// milliseconds is as live as before, and a slow one costs Postgres at
// most a tenth of the time. No read is reused longer than
// maxLockoutReuse, however long it took (a read held up behind a lock):
// a live list minutes old would mislead more than it saves.
const (
	lockoutReuse    = 10
	maxLockoutReuse = 10 * time.Second
)

// lockoutFigures are the lockouts in force last read, and the one place to
// read them, so that readers asking at once wait for one read.
type lockoutFigures struct {
	turn chan struct{}

	mu   sync.Mutex
	at   time.Time     // when the last read ended; zero: never, or forgotten
	took time.Duration // how long it took
	list []auth.Lockout
	n    int
	// gen counts LockoutsChanged: a read that began before one does not
	// store what it read, which may predate the change.
	gen uint64
}

func newLockoutFigures() *lockoutFigures {
	return &lockoutFigures{turn: make(chan struct{}, 1)}
}

// fresh returns the lockouts read less than lockoutReuse times their
// reading time before now; a clock set back makes them stale.
func (l *lockoutFigures) fresh(now time.Time) ([]auth.Lockout, int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at.IsZero() || now.Before(l.at) || now.Sub(l.at) >= min(lockoutReuse*l.took, maxLockoutReuse) {
		return nil, 0, false
	}
	// A copy: the readers share what was read.
	return slices.Clone(l.list), l.n, true
}

// LockoutsChanged makes the next read of the dashboard read the lockouts
// in force again: after an administrator's unlock on this replica, so
// that the page it returns to shows it.
func (r *Reader) LockoutsChanged() {
	if r == nil {
		return
	}
	l := r.lockoutFigures
	l.mu.Lock()
	l.at = time.Time{}
	l.gen++
	l.mu.Unlock()
}

// lockouts returns the latest lockouts in force, at most LockoutsListed,
// and their count, read again once lockoutReuse times their last reading
// time has passed; a failed read is not kept.
func (r *Reader) lockouts(ctx context.Context) ([]auth.Lockout, int, error) {
	l := r.lockoutFigures
	if list, n, ok := l.fresh(r.now()); ok {
		return list, n, nil
	}
	select {
	case l.turn <- struct{}{}:
		defer func() { <-l.turn }()
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("%w: reading lockouts: %w", auth.ErrUnavailable, ctx.Err())
	}
	// Read meanwhile by the reader this one waited for.
	start := r.now()
	if list, n, ok := l.fresh(start); ok {
		return list, n, nil
	}
	l.mu.Lock()
	gen := l.gen
	l.mu.Unlock()
	list, err := r.accounts.ActiveLockouts(ctx, LockoutsListed)
	if err != nil {
		return nil, 0, err
	}
	n, err := r.store.CountActiveLockouts(ctx, start)
	if err != nil {
		return nil, 0, err
	}
	end := r.now()
	l.mu.Lock()
	if l.gen == gen {
		l.at, l.took, l.list, l.n = end, end.Sub(start), slices.Clone(list), n
	}
	l.mu.Unlock()
	return list, n, nil
}
