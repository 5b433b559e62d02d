package ratelimit_test

// What an unlock and a failback read of the locks and unlocks made in
// process while Redis was away, under the lock every failure decided in
// process waits for: their own identity's, not the whole list's, which
// holds up to MaxMade of each rule's.

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// TestOutageUnlockReadsItsOwnLocks: an unlock during an outage in which
// MaxMade locks were made in process ends its identity's one lock,
// reading no other.
func TestOutageUnlockReadsItsOwnLocks(t *testing.T) {
	f, p, _ := replicaWith(t, policies)
	p.down.Store(true)
	_ = f.Check(t.Context())
	others := make([]ratelimit.HeldLock, ratelimit.MaxMade-1)
	for i := range others {
		others[i] = ratelimit.HeldLock{Name: owner.Name, ID: fmt.Sprint("acct-", i), Until: time.Now().Add(time.Hour), Level: 1}
	}
	if err := f.Hold(t.Context(), others...); err != nil {
		t.Fatal(err)
	}
	lockInProcess(t, f, owner.ID)
	before := ratelimit.Looked(f)
	if _, err := f.Clear(t.Context(), owner.Name, owner.ID); err != nil {
		t.Fatal(err)
	}
	if n := ratelimit.Looked(f) - before; n > 1 {
		t.Fatalf("an unlock among %d locks made in process read %d of them; want its own one", ratelimit.MaxMade, n)
	}
	if d, err := f.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Fatalf("the owner, unlocked during the outage: %+v, %v; want admitted", d.Results, err)
	}
}

// TestFailbackEndsAgainReadingOwnLocks: a failback that, once Redis
// decides, ends again the unlocks made while it handed the limits back
// reads at most one lock for each, however many other identities' were
// made meanwhile (it reads none: each unlock is ended before the locks
// made after it are given, which it need not look for).
func TestFailbackEndsAgainReadingOwnLocks(t *testing.T) {
	const n = 1000
	f, p, _ := replicaWith(t, policies)
	p.down.Store(true)
	_ = f.Check(t.Context())
	var once sync.Once
	before := make(chan int, 1)
	ratelimit.WhileScanning(f, func() {
		once.Do(func() {
			for i := range n {
				if _, err := f.Clear(t.Context(), owner.Name, fmt.Sprint("unlocked-", i)); err != nil {
					t.Error(err)
				}
			}
			late := make([]ratelimit.HeldLock, n)
			for i := range late {
				late[i] = ratelimit.HeldLock{Name: owner.Name, ID: fmt.Sprint("late-", i), Until: time.Now().Add(time.Hour), Level: 1}
			}
			if err := f.Hold(t.Context(), late...); err != nil {
				t.Error(err)
			}
			before <- ratelimit.Looked(f)
		})
	})
	p.down.Store(false)
	waitRecovered(t, f)
	deadline := time.Now().Add(20 * time.Second)
	for made, cleared := ratelimit.Kept(f); made+cleared > 0; made, cleared = ratelimit.Kept(f) {
		if time.Now().After(deadline) {
			t.Fatalf("20 s after Redis came back: %d locks and %d unlocks made in process still kept", made, cleared)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if looked := ratelimit.Looked(f) - <-before; looked > n {
		t.Fatalf("the failback read %d locks made in process for %d unlocks made during it, with %d late locks of others; want at most one each", looked, n, n)
	}
}

// TestUnlockOfAFullGroupReadsNoOtherUnlock: once a rule's recent unlocks
// kept for the lockout log fill its places, a further unlock reads the
// oldest alone to find whether one may be forgotten, not all of them.
func TestUnlockOfAFullGroupReadsNoOtherUnlock(t *testing.T) {
	f, p, _ := replicaWith(t, policies)
	f.SetLogged(owner.Name)
	p.down.Store(true)
	_ = f.Check(t.Context())
	for i := range ratelimit.MaxMade {
		if _, err := f.Clear(t.Context(), owner.Name, fmt.Sprint("acct-", i)); err != nil {
			t.Fatal(err)
		}
	}
	const more = 10
	before := ratelimit.Looked(f)
	for i := range more {
		if _, err := f.Clear(t.Context(), owner.Name, fmt.Sprint("more-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := ratelimit.Looked(f) - before; n > more {
		t.Fatalf("%d unlocks past %d kept read %d of them; want at most one each", more, ratelimit.MaxMade, n)
	}
}
