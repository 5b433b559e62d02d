package ratelimit_test

import (
	"testing"

	"github.com/xcloak/xcloak/ratelimit"
)

// TestUnloggedLockOutlivesTheNextOutage: a device's lock made in process
// during one outage still holds in process during the next. The lockout
// log records only the accounts' locks (SetLogged), so the start of an
// outage forgets what the in-process store held of those alone, to be
// loaded again from the log; a lock the log never records would otherwise
// be forgotten with nothing to bring it back, and a Redis that comes and
// goes would give the device's guesser a threshold of guesses each time.
func TestUnloggedLockOutlivesTheNextOutage(t *testing.T) {
	f, p, _ := replicaWith(t, policies)
	f.SetLogged(owner.Name)
	device := ratelimit.Rule{Name: "login_device", ID: "device-1", Limit: ratelimit.PerMinute(100), Lockable: true}
	outage := func() {
		t.Helper()
		p.down.Store(true)
		_ = f.Check(t.Context())
		if !f.Degraded() {
			t.Fatal("not degraded")
		}
	}

	outage()
	lock := lockAt(t, f, device.Name, device.ID)
	if d, err := f.AllowAll(t.Context(), device); err != nil || d.Allowed {
		t.Fatalf("in process, locked: %+v, %v; want refused", d.Results, err)
	}
	p.down.Store(false)
	waitRecovered(t, f)

	outage()
	d, err := f.AllowAll(t.Context(), device)
	if err != nil || d.Allowed {
		t.Fatalf("the next outage, the lock in force until %v: %+v, %v; want refused", lock.Until, d.Results, err)
	}
}
