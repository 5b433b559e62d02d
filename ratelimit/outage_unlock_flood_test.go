package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// TestUnlockAsTheOutageBeginsAfterAFloodOfAnAppsUnlocks: an unlock of
// XCloak's own account whose call to Redis fails after another request
// found Redis gone and the lockouts in force were loaded, from a log read
// before the unlock, is not undone by them, though an application's key
// made unlocks at will past the bound just before.
func TestUnlockAsTheOutageBeginsAfterAFloodOfAnAppsUnlocks(t *testing.T) {
	pols := appGroupedPolicies()
	rdb, shared := sharedRedis(t, pols)
	local, err := ratelimit.NewLocal(pols, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &partition{}
	hs := &hookStore{partitioned: partitioned{shared, p}}
	f := failoverOver(t, hs, local, rdb, p)
	f.SetLogged(owner.Name)
	f.Restore = newLockLog().restore
	// The flood, made in one outage.
	p.down.Store(true)
	for i := range ratelimit.MaxMade + 10 {
		if _, err := f.Clear(t.Context(), owner.Name, fmt.Sprint("app shop acct-", i)); err != nil {
			t.Fatal(err)
		}
	}
	p.down.Store(false)
	waitRecovered(t, f)

	lock := ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Since: time.Now(), Until: time.Now().Add(time.Hour), Level: 1}
	if err := shared.Hold(t.Context(), lock); err != nil {
		t.Fatal(err)
	}
	log := newLockLog(lock)
	f.Restore = log.restore
	other := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.1", Limit: ratelimit.PerMinute(100)}
	hs.clearErr = func(id string) error {
		p.down.Store(true)
		// Another request finds the outage, and decides in process
		// once the lockouts in force are loaded.
		if _, err := f.AllowAll(context.Background(), other); err != nil {
			t.Error(err)
		}
		return errPartitioned
	}
	if _, err := f.Clear(t.Context(), owner.Name, owner.ID); err != nil {
		t.Fatal(err)
	}
	log.set() // the service ends the log's record after the unlock
	d, err := f.AllowAll(t.Context(), owner)
	if err != nil || !d.Allowed {
		t.Fatalf("the owner, unlocked as the outage began after a flood of an application's unlocks: %+v, %v; want admitted", d.Results, err)
	}
}
