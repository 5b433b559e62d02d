package auth_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// heard is an EventHook that keeps the rows it hears.
type heard struct {
	mu   sync.Mutex
	rows []auth.Event
}

func (h *heard) EventsWritten(rows []auth.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rows = append(h.rows, rows...)
}

func (h *heard) Run(ctx context.Context) { <-ctx.Done() }

func (h *heard) of(kind string) []auth.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []auth.Event
	for _, e := range h.rows {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// TestLockoutEndedOnceAcrossReplicas: two replicas on the same stores,
// both looking for lockouts that ran out at the same moment, record the
// end of each once between them, and their hooks hear it once; a lockout
// ended early by an administrator is never "ended" again.
func TestLockoutEndedOnceAcrossReplicas(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	lockout := func(c *auth.Config) { c.Lockout.Threshold = 2 }
	h1, h2 := &heard{}, &heard{}
	a := xcloaktest.New(t, xcloaktest.Options{Now: clock, Hook: h1, Auth: lockout})
	b := a.Replica(t, xcloaktest.Options{Now: clock, Hook: h2, Auth: lockout})
	const accounts = 20
	emails := make([]string, accounts)
	for i := range emails {
		emails[i] = "user" + string(rune('a'+i)) + "@example.com"
		a.AddUser(t, emails[i], "correct horse battery staple", false)
		// A network each, under the limits per network.
		client := auth.Client{Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)})}
		// Two different wrong passwords (a retyped one counts once), never
		// the same on two accounts (that is spraying).
		for _, wrong := range []string{emails[i] + " one", emails[i] + " two"} {
			if _, err := a.Service.Login(t.Context(), auth.LoginRequest{Email: emails[i], Password: wrong, Client: client}); err == nil {
				t.Fatal("a wrong password signed in")
			}
		}
	}
	if _, err := a.Service.Unlock(t.Context(), emails[0], "admin:boss@example.com"); err != nil {
		t.Fatal(err)
	}
	a.Flush(t)
	if n := len(h1.of(auth.EventLockout)); n != accounts {
		t.Fatalf("%d lockouts heard, want %d", n, accounts)
	}

	mu.Lock()
	now = now.Add(time.Hour) // every lockout has run out
	mu.Unlock()
	var wg sync.WaitGroup
	ended := make([]int, 2)
	for i, svc := range []*auth.Service{a.Service, b.Service} {
		wg.Go(func() {
			n, err := auth.EndLockouts(svc, t.Context())
			if err != nil {
				t.Error(err)
			}
			ended[i] = n
		})
	}
	wg.Wait()
	a.Flush(t)
	b.Flush(t)
	if ended[0]+ended[1] != accounts-1 {
		t.Errorf("the replicas ended %v lockouts, want %d between them", ended, accounts-1)
	}
	seen := map[string]int{}
	for _, e := range append(h1.of(auth.EventLockoutEnded), h2.of(auth.EventLockoutEnded)...) {
		seen[e.Account]++
		if e.Detail["until"] == "" || e.Detail["level"] != "1" {
			t.Errorf("lockout_ended %+v lacks its until or level", e)
		}
	}
	if seen[emails[0]] != 0 {
		t.Errorf("the lockout an administrator ended was ended again")
	}
	for _, email := range emails[1:] {
		if seen[email] != 1 {
			t.Errorf("%s: lockout_ended heard %d times, want 1", email, seen[email])
		}
	}
	var rows int
	if err := a.DB.QueryRow(t.Context(), `SELECT count(*) FROM security_events WHERE kind = $1`, auth.EventLockoutEnded).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != accounts-1 {
		t.Errorf("%d lockout_ended rows, want %d", rows, accounts-1)
	}
	if n, err := auth.EndLockouts(b.Service, t.Context()); err != nil || n != 0 {
		t.Errorf("a second round ended %d, %v; want none", n, err)
	}
}

// TestOldLockoutEndsAreClosedWithoutEvents: the first sweep after the
// upgrade that brought it (or after every replica was down for long)
// finds every lockout whose time ran out long ago. It closes them, but
// records lockout_ended only for those that ended within the horizon: a
// backlog of history would flood the event queue, displacing the events
// of sign-ins made meanwhile, and send receivers ends of lockouts they
// were never told had started.
func TestOldLockoutEndsAreClosedWithoutEvents(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	h := &heard{}
	a := xcloaktest.New(t, xcloaktest.Options{Now: clock, Hook: h, Auth: func(c *auth.Config) { c.Lockout.Threshold = 2 }})
	lock := func(email string, net byte) {
		a.AddUser(t, email, "correct horse battery staple", false)
		client := auth.Client{Addr: netip.AddrFrom4([4]byte{192, 0, 2, net})}
		for _, wrong := range []string{email + " one", email + " two"} {
			if _, err := a.Service.Login(t.Context(), auth.LoginRequest{Email: email, Password: wrong, Client: client}); err == nil {
				t.Fatal("a wrong password signed in")
			}
		}
	}
	lock("old@example.com", 1)
	advance(3 * time.Hour)
	lock("recent@example.com", 2)
	advance(30 * time.Minute) // both ran out: one 3h15m ago, one 15m ago
	n, err := auth.EndLockouts(a.Service, t.Context())
	if err != nil {
		t.Fatal(err)
	}
	a.Flush(t)
	if n != 2 {
		t.Errorf("%d lockouts ended, want 2 (the old one closed too)", n)
	}
	ended := h.of(auth.EventLockoutEnded)
	if len(ended) != 1 || ended[0].Account != "recent@example.com" {
		t.Errorf("lockout_ended heard for %v, want only recent@example.com", ended)
	}
	if n, err := auth.EndLockouts(a.Service, t.Context()); err != nil || n != 0 {
		t.Errorf("a second round ended %d, %v; want none", n, err)
	}
}

// TestUnlockAtTheEndWinsOverTheSweep: an administrator's unlock that reads
// the clock just before the lockout's time runs out, and reaches Postgres
// just after (a busy pool, a pause), still ends the lockout early; the
// sweep, looking a moment later, does not claim it first, so receivers
// hear account.unlocked and not also lockout.ended.
func TestUnlockAtTheEndWinsOverTheSweep(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
	h := &heard{}
	a := xcloaktest.New(t, xcloaktest.Options{Now: clock, Hook: h, Auth: func(c *auth.Config) { c.Lockout.Threshold = 2 }})
	const email = "ann@example.com"
	a.AddUser(t, email, "correct horse battery staple", false)
	client := auth.Client{Addr: netip.AddrFrom4([4]byte{192, 0, 2, 1})}
	for _, wrong := range []string{"wrong one", "wrong two"} {
		if _, err := a.Service.Login(t.Context(), auth.LoginRequest{Email: email, Password: wrong, Client: client}); err == nil {
			t.Fatal("a wrong password signed in")
		}
	}
	a.Flush(t)
	lockouts, err := a.Service.ActiveLockouts(t.Context(), 10)
	if err != nil || len(lockouts) != 1 {
		t.Fatalf("ActiveLockouts = %v, %v; want ann's", lockouts, err)
	}
	until := lockouts[0].LockedUntil
	// The sweep of a replica whose clock passed the end a second ago.
	set(until.Add(time.Second))
	if _, err := auth.EndLockouts(a.Service, t.Context()); err != nil {
		t.Fatal(err)
	}
	// The unlock, whose clock read a millisecond before the end.
	set(until.Add(-time.Millisecond))
	if _, err := a.Service.Unlock(t.Context(), email, "admin:boss@example.com"); err != nil {
		t.Fatal(err)
	}
	set(until.Add(time.Hour))
	if _, err := auth.EndLockouts(a.Service, t.Context()); err != nil {
		t.Fatal(err)
	}
	a.Flush(t)
	if n := len(h.of(auth.EventUnlock)); n != 1 {
		t.Errorf("%d unlocks heard, want 1", n)
	}
	if ended := h.of(auth.EventLockoutEnded); len(ended) != 0 {
		t.Errorf("lockout_ended heard after an unlock ended the lockout first: %v", ended)
	}
}

// TestSecondStepLockEndsWithoutEvent: a second step's lock in the lockout
// log, which began with no lockout event (its own is mfa_lockout), ends
// with no lockout_ended either, so that receivers hear no end of a
// lockout.started they were never sent; a password's lockout ending with
// it is heard.
func TestSecondStepLockEndsWithoutEvent(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	h := &heard{}
	a := xcloaktest.New(t, xcloaktest.Options{Now: clock, Hook: h})
	// In force when written, so that the service's own round, run as it
	// starts, ends none of them; ended by the round below alone.
	for _, key := range []string{"ann@example.com", auth.SecondStepLockPrefix + "ann@example.com", auth.SecondStepLockPrefix + "held bob@example.com"} {
		if _, err := a.DB.Exec(t.Context(), `INSERT INTO lockouts (account_key, level, failures, locked_at, locked_until)
			VALUES ($1, 1, 5, $2, $3)`, key, clock().Add(-time.Hour), clock().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	advance(2 * time.Minute)
	n, err := auth.EndLockouts(a.Service, t.Context())
	if err != nil {
		t.Fatal(err)
	}
	a.Flush(t)
	if n != 3 {
		t.Errorf("%d lockouts ended, want 3", n)
	}
	if ended := h.of(auth.EventLockoutEnded); len(ended) != 1 || ended[0].Account != "ann@example.com" {
		t.Errorf("lockout_ended heard for %v, want the password's lockout of ann alone", ended)
	}
}
