package ratelimit_test

import (
	"testing"

	"github.com/xcloak/xcloak/ratelimit"
)

// TestUnlockJustBeforeAnOutageOutlivesItsFailback: an account unlocked
// through this replica while Redis answered (a password reset, an
// administrator's unlock), whose record the caller ends in the lockout
// log only once the unlock has returned, is not locked again by a
// failback that read the log before that: the unlock came last, as the
// outage's own load of the log (restore) already knows.
func TestUnlockJustBeforeAnOutageOutlivesItsFailback(t *testing.T) {
	f, p, shared := replicaWith(t, policies)
	f.SetLogged(owner.Name)
	lock := lockAt(t, shared, owner.Name, owner.ID)
	log := newLockLog(lock) // the service recorded the lock
	f.Restore = log.restore
	if was, err := f.Clear(t.Context(), owner.Name, owner.ID); err != nil || !was {
		t.Fatalf("unlock with Redis up: %v, %v", was, err)
	}
	// Redis is lost and back before the caller has ended the log's record.
	p.down.Store(true)
	_ = f.Check(t.Context())
	if !f.Degraded() {
		t.Fatal("not degraded")
	}
	if d, err := f.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Fatalf("in process, after the unlock: %+v, %v; want admitted", d.Results, err)
	}
	p.down.Store(false)
	waitRecovered(t, f)
	log.set() // the caller ends the record at last
	if d, err := f.AllowAll(t.Context(), owner); err != nil || !d.Allowed {
		t.Fatalf("back on Redis, the unlock came last: %+v, %v; want admitted", d.Results, err)
	}
	if d, err := shared.AllowAll(t.Context(), ratelimit.Rule{Name: owner.Name, ID: owner.ID, Lockable: true}); err != nil || !d.Allowed {
		t.Fatalf("in Redis: %+v, %v; want no lock", d.Results, err)
	}
}
