package dashboard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// accountsTTL is how long a replica shows the account figures (the
// accounts, and those with a second factor) it counted. Counting is a scan
// of every account in Postgres, about 70 ms at a million, and the live
// dashboard reads its figures every second for each period watched, on
// every replica: counted each time, a wall screen left open would cost
// the database a tenth of a core. Figures that move with sign-ups and
// enrolments are as good ten seconds old.
const accountsTTL = 10 * time.Second

// accountFigures are the account figures last counted, and the one place
// to count them, so that readers asking at once wait for one count.
type accountFigures struct {
	turn chan struct{}

	mu                   sync.Mutex
	at                   time.Time // when the last count ended; zero: never
	accounts, withFactor int64
}

func newAccountFigures() *accountFigures {
	return &accountFigures{turn: make(chan struct{}, 1)}
}

// fresh returns the figures of a count that ended less than accountsTTL
// before now; a clock set back makes them stale, rather than kept until
// it passes their time again.
func (a *accountFigures) fresh(now time.Time) (accounts, withFactor int64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.at.IsZero() || now.Before(a.at) || now.Sub(a.at) >= accountsTTL {
		return 0, 0, false
	}
	return a.accounts, a.withFactor, true
}

// countAccounts returns the account figures, counted at most once per
// accountsTTL; a failed count is not kept.
func (r *Reader) countAccounts(ctx context.Context) (accounts, withFactor int64, err error) {
	a := r.accountFigures
	if accounts, withFactor, ok := a.fresh(r.now()); ok {
		return accounts, withFactor, nil
	}
	select {
	case a.turn <- struct{}{}:
		defer func() { <-a.turn }()
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("%w: counting accounts: %w", auth.ErrUnavailable, ctx.Err())
	}
	// Counted meanwhile by the reader this one waited for.
	if accounts, withFactor, ok := a.fresh(r.now()); ok {
		return accounts, withFactor, nil
	}
	if accounts, withFactor, err = r.store.CountFactorAccounts(ctx); err != nil {
		return 0, 0, err
	}
	// Stamped when the count ended, so that a slow count's figures serve
	// their lifetime after it, not less.
	a.mu.Lock()
	a.at, a.accounts, a.withFactor = r.now(), accounts, withFactor
	a.mu.Unlock()
	return accounts, withFactor, nil
}
