package ratelimit_test

import (
	"testing"
	"time"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

// TestFailoverLockoutsPerRule: a second rule's lockouts (a browser's own
// lock beside the account's) lock that rule's identity only, in Redis and,
// after Redis is lost, in process; Clear ends such a lock.
func TestFailoverLockoutsPerRule(t *testing.T) {
	srv := testenv.PrivateRedis(t)
	rdb := fastClient(t, srv.URL())
	f := newFailover(t, rdb, ratelimit.FailLocal)
	limit := ratelimit.Limit{Count: 1000, Window: time.Minute}
	account := ratelimit.Rule{Name: "login_account", ID: "ann@example.com", Limit: limit, Lockable: true}
	device := func(id string) ratelimit.Rule {
		return ratelimit.Rule{Name: "login_device", ID: id, Limit: limit, Lockable: true}
	}
	allowed := func(r ratelimit.Rule) bool {
		t.Helper()
		d, err := f.AllowAll(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}
	lock := func(id string) {
		t.Helper()
		for i := range policy.Threshold {
			fl, err := f.Fail(t.Context(), "login_device", id, "")
			if err != nil {
				t.Fatal(err)
			}
			if fl.LockedNow != (i == policy.Threshold-1) {
				t.Fatalf("failure %d of %s: %+v", i+1, id, fl)
			}
		}
	}

	lock("device-a")
	if allowed(device("device-a")) || !allowed(device("device-b")) || !allowed(account) {
		t.Fatal("with Redis: a device's lock must hold that device only")
	}
	if was, err := f.Clear(t.Context(), "login_device", "device-a"); err != nil || !was {
		t.Fatalf("Clear: %v, %v; want it to end the lock", was, err)
	}
	if !allowed(device("device-a")) {
		t.Fatal("device still locked after Clear")
	}

	srv.Stop()
	lock("device-c")
	if !f.Degraded() {
		t.Fatal("not degraded with Redis down")
	}
	if allowed(device("device-c")) || !allowed(device("device-b")) || !allowed(account) {
		t.Fatal("in process: a device's lock must hold that device only")
	}
	if _, err := f.Fail(t.Context(), "no_such_rule", "x", ""); err == nil {
		t.Fatal("Fail under a rule without lockouts: no error")
	}
}
