package dashboard_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/ratelimit"
)

// countingStore counts the accounts on every call, as Postgres does with
// a scan of every account, and fails while fail is set.
type countingStore struct {
	dashboard.Store
	counts   atomic.Int64
	accounts atomic.Int64
	fail     atomic.Bool
}

func (s *countingStore) CountFactorAccounts(context.Context) (int64, int64, error) {
	s.counts.Add(1)
	if s.fail.Load() {
		return 0, 0, errors.New("connection refused")
	}
	n := s.accounts.Load()
	return n, n / 2, nil
}

func (*countingStore) CountActiveLockouts(context.Context, time.Time) (int, error) { return 0, nil }

type noCounters struct{}

func (noCounters) Snapshot(_ context.Context, p dashboard.Period, _ time.Time, _ int) (dashboard.Snapshot, error) {
	return dashboard.Snapshot{Summary: dashboard.Summary{Period: p}}, nil
}

type noAccounts struct{}

func (noAccounts) ActiveLockouts(context.Context, int) ([]auth.Lockout, error) { return nil, nil }
func (noAccounts) Degraded() bool                                              { return false }
func (noAccounts) FailurePolicy() ratelimit.FailurePolicy                      { return ratelimit.FailOpen }

// TestAccountFiguresCountedOnceAWhile: the dashboard's account figures,
// a scan of every account in Postgres, are counted once per ten seconds
// on a replica, however many periods its live dashboards watch each
// second and however many of them ask at once; a failed count is not
// kept.
func TestAccountFiguresCountedOnceAWhile(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	store := &countingStore{}
	store.accounts.Store(1000)
	r := dashboard.New(noCounters{}, store, noAccounts{}, nil, clock, nil)

	figures := func() (int64, int64) {
		t.Helper()
		d, err := r.Dashboard(t.Context(), dashboard.Period5m)
		if err != nil {
			t.Fatal(err)
		}
		return d.Summary.Accounts, d.Summary.AccountsWithFactor
	}
	// Nine seconds of three periods watched, each read every second, by
	// four readers at once.
	for range 10 {
		var wg sync.WaitGroup
		for range 12 {
			wg.Go(func() {
				if a, f := figures(); a != 1000 || f != 500 {
					t.Errorf("figures %d and %d; want 1000 and 500", a, f)
				}
			})
		}
		wg.Wait()
		if store.counts.Load() != 1 {
			t.Fatalf("accounts counted %d times within ten seconds; want once", store.counts.Load())
		}
		advance(900 * time.Millisecond)
	}
	// Ten seconds on, counted again, and the new figure shown.
	store.accounts.Store(1001)
	advance(time.Second)
	if a, _ := figures(); a != 1001 || store.counts.Load() != 2 {
		t.Errorf("ten seconds on: %d accounts, counted %d times; want 1001, twice", a, store.counts.Load())
	}
	// A failed count fails the dashboard, as before, and is asked again
	// at the next read; a clock set back does not keep a figure longer.
	advance(10 * time.Second)
	store.fail.Store(true)
	if _, err := r.Dashboard(t.Context(), dashboard.Period5m); err == nil {
		t.Error("a failed count: no error")
	}
	store.fail.Store(false)
	if figures(); store.counts.Load() != 4 {
		t.Errorf("after a failed count, counted %d times; want 4", store.counts.Load())
	}
	advance(-time.Hour)
	if figures(); store.counts.Load() != 5 {
		t.Errorf("the clock set back: counted %d times; want 5", store.counts.Load())
	}
}

// slowCountStore counts once release is closed, each count taking the
// clock past the figures' lifetime.
type slowCountStore struct {
	countingStore
	release chan struct{}
	advance func()
}

func (s *slowCountStore) CountFactorAccounts(ctx context.Context) (int64, int64, error) {
	<-s.release
	s.advance()
	return s.countingStore.CountFactorAccounts(ctx)
}

// TestSlowAccountCountServesItsWaiters: readers that waited for a count
// that took longer than the figures last take its figures, rather than
// each count again in turn.
func TestSlowAccountCountServesItsWaiters(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	store := &slowCountStore{release: make(chan struct{}), advance: func() { mu.Lock(); now = now.Add(30 * time.Second); mu.Unlock() }}
	store.accounts.Store(7)
	r := dashboard.New(noCounters{}, store, noAccounts{}, nil, clock, nil)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if d, err := r.Dashboard(t.Context(), dashboard.Period5m); err != nil || d.Summary.Accounts != 7 {
				t.Errorf("figures %d, %v; want 7", d.Summary.Accounts, err)
			}
		})
	}
	// The readers queue behind the first count, or come after it.
	close(store.release)
	wg.Wait()
	if n := store.counts.Load(); n != 1 {
		t.Errorf("accounts counted %d times by readers that waited for one count; want once", n)
	}
}
