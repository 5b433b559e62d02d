package dashboard_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
)

// slowLockouts are lockouts in force whose reading takes a while: each
// read of the list and of the count moves the test's clock by took.
type slowLockouts struct {
	countingStore
	noAccounts
	advance func(time.Duration)
	took    time.Duration
	lists   atomic.Int64
	counts  atomic.Int64
}

func (s *slowLockouts) ActiveLockouts(context.Context, int) ([]auth.Lockout, error) {
	s.lists.Add(1)
	s.advance(s.took)
	return []auth.Lockout{{Account: "ann@example.com"}}, nil
}

func (s *slowLockouts) CountActiveLockouts(context.Context, time.Time) (int, error) {
	s.counts.Add(1)
	s.advance(s.took)
	return 1, nil
}

// TestSlowLockoutsReadOnceAWhile: the lockouts in force, whose list and
// count read every lockout in force (tens of thousands under a large
// attack), are read again only once ten times their reading time has
// passed, so that the live dashboard costs Postgres at most a tenth of its
// time however large the attack; a fast read is as live as before, and an
// administrator's unlock on this replica shows at the next read.
func TestSlowLockoutsReadOnceAWhile(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := &slowLockouts{advance: advance, took: 50 * time.Millisecond}
	r := dashboard.New(noCounters{}, s, s, nil, clock, nil)
	read := func() {
		t.Helper()
		d, err := r.Dashboard(t.Context(), dashboard.Period5m)
		if err != nil || len(d.Lockouts) != 1 || d.Summary.ActiveLockouts != 1 {
			t.Fatalf("lockouts %v, %d in force, %v; want ann's, 1", d.Lockouts, d.Summary.ActiveLockouts, err)
		}
	}
	reads := func() int64 {
		if s.lists.Load() != s.counts.Load() {
			t.Fatalf("the list read %d times, the count %d", s.lists.Load(), s.counts.Load())
		}
		return s.lists.Load()
	}

	// Read in 100 ms: reused for a second, read again after it.
	read()
	for range 9 {
		advance(100 * time.Millisecond)
		read()
	}
	if reads() != 1 {
		t.Fatalf("the lockouts read %d times within ten times their reading time; want once", reads())
	}
	advance(100 * time.Millisecond)
	read()
	if reads() != 2 {
		t.Fatalf("a second on, the lockouts read %d times; want twice", reads())
	}
	// An unlock here shows at the next read.
	r.LockoutsChanged()
	read()
	if reads() != 3 {
		t.Fatalf("after an unlock, the lockouts read %d times; want 3", reads())
	}
	// A read held up for a minute is reused ten seconds, not ten minutes.
	s.took = 30 * time.Second
	advance(2 * time.Second)
	read()
	advance(10 * time.Second)
	read()
	if reads() != 5 {
		t.Fatalf("after a read that took a minute, the lockouts read %d times ten seconds on; want 5", reads())
	}
	// A read that takes no time is made at every read, as before.
	s.took = 0
	advance(11 * time.Second)
	read()
	read()
	if reads() != 7 {
		t.Fatalf("fast reads: the lockouts read %d times; want 7", reads())
	}
}

// unlockMidRead are lockouts in force of which ann's is lifted while a
// read is under way: the list is read with ann's lockout, then the read
// waits at entered until release.
type unlockMidRead struct {
	countingStore
	noAccounts
	advance          func(time.Duration)
	locked           atomic.Bool
	entered, release chan struct{}
	once             sync.Once
}

func (s *unlockMidRead) ActiveLockouts(context.Context, int) ([]auth.Lockout, error) {
	var list []auth.Lockout
	if s.locked.Load() {
		list = []auth.Lockout{{Account: "ann@example.com"}}
	}
	s.advance(50 * time.Millisecond)
	s.once.Do(func() { close(s.entered); <-s.release })
	return list, nil
}

func (s *unlockMidRead) CountActiveLockouts(context.Context, time.Time) (int, error) {
	if s.locked.Load() {
		return 1, nil
	}
	return 0, nil
}

// TestUnlockDuringALockoutsReadShows: an administrator's unlock on this
// replica that lands while another reader (the live dashboard) is reading
// the lockouts in force shows on the page the unlock returns to, rather
// than the list read before it being reused for ten times its reading
// time.
func TestUnlockDuringALockoutsReadShows(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := &unlockMidRead{advance: advance, entered: make(chan struct{}), release: make(chan struct{})}
	s.locked.Store(true)
	r := dashboard.New(noCounters{}, s, s, nil, clock, nil)

	done := make(chan error)
	go func() {
		_, err := r.Dashboard(t.Context(), dashboard.Period5m)
		done <- err
	}()
	<-s.entered
	// The unlock commits, then tells the dashboard, as handleUnlock does.
	s.locked.Store(false)
	r.LockoutsChanged()
	close(s.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	d, err := r.Dashboard(t.Context(), dashboard.Period5m)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Lockouts) != 0 {
		t.Fatalf("after the unlock, the dashboard lists %v; want none", d.Lockouts)
	}
}
