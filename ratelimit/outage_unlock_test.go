package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// TestUnlockAsTheOutageBeginsStays: an unlock made as Redis is lost (the
// call that finds it gone, or one made while the lockouts in force are
// being loaded) ends the in-process lock for the rest of the outage,
// though the load read the lockout log before the service ended the
// lock's record there, which it does once the limits have answered.
func TestUnlockAsTheOutageBeginsStays(t *testing.T) {
	for _, tc := range []struct {
		name string
		// unlock unlocks the owner as the outage begins, and closes
		// release, which the load of the lockouts in force waits for
		// after it has read the log.
		unlock func(t *testing.T, f *ratelimit.Failover, release chan struct{})
	}{
		{"unlock finds the outage", func(t *testing.T, f *ratelimit.Failover, release chan struct{}) {
			close(release)
			if was, err := f.Clear(t.Context(), owner.Name, owner.ID); err != nil || !was {
				t.Fatalf("unlock: %v, %v", was, err)
			}
		}},
		{"unlock during the load", func(t *testing.T, f *ratelimit.Failover, release chan struct{}) {
			other := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.1", Limit: ratelimit.PerMinute(100)}
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = f.AllowAll(context.Background(), other) // finds the outage
			}()
			for !f.Degraded() {
				time.Sleep(time.Millisecond)
			}
			// Whether it reports the lock is the lockout log's to say.
			if _, err := f.Clear(t.Context(), owner.Name, owner.ID); err != nil {
				t.Errorf("unlock: %v", err)
			}
			close(release)
			<-done
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb, shared := sharedRedis(t, policies)
			p := &partition{}
			f := replica(t, shared, rdb, p)
			f.SetLogged(owner.Name)
			lock := ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Since: time.Now(), Until: time.Now().Add(time.Hour), Level: 1}
			log := newLockLog(lock)
			release, read := make(chan struct{}), make(chan struct{})
			first := true
			f.Restore = func(ctx context.Context) ([]ratelimit.HeldLock, error) {
				locks, err := log.restore(ctx)
				if first {
					first = false
					<-release
					close(read)
				}
				return locks, err
			}
			if err := f.Hold(t.Context(), lock); err != nil {
				t.Fatal(err)
			}

			p.down.Store(true)
			tc.unlock(t, f, release)
			<-read
			log.set() // the service ends the log's record after the unlock
			d, err := f.AllowAll(t.Context(), owner)
			if !f.Degraded() {
				t.Fatal("not degraded while cut off")
			}
			if err != nil || !d.Allowed {
				t.Fatalf("the owner, unlocked as the outage began: %+v, %v; want admitted", d, err)
			}
		})
	}
}

// TestFailedUnlockLeavesTheLogsLock: an unlock that Redis refused leaves
// the lock listed in the lockout log, which holds it in process in the
// next outage.
func TestFailedUnlockLeavesTheLogsLock(t *testing.T) {
	f, hs, p, _ := hookedReplica(t)
	f.SetLogged(owner.Name)
	lock := ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Since: time.Now(), Until: time.Now().Add(time.Hour), Level: 1}
	f.Restore = newLockLog(lock).restore
	if err := f.Hold(t.Context(), lock); err != nil {
		t.Fatal(err)
	}
	hs.clearErr = func(string) error { return replyErr("ERR refused") }
	if _, err := f.Clear(t.Context(), owner.Name, owner.ID); err == nil {
		t.Fatal("unlock refused by Redis: no error")
	}
	p.down.Store(true)
	if d, err := f.AllowAll(t.Context(), owner); err != nil || d.Allowed {
		t.Fatalf("the owner in the next outage, the unlock having failed: %+v, %v; want refused as locked", d.Results, err)
	}
}

// TestAdminLockAsTheOutageBeginsHolds: an administrator's lock whose call
// to Redis fails after another request found Redis gone, and after the
// lockouts in force were loaded for the outage (which forget what was
// held in process before it, this lock among them, and read a lockout log
// it is not in yet), holds in process for the outage.
func TestAdminLockAsTheOutageBeginsHolds(t *testing.T) {
	f, hs, p, _ := hookedReplica(t)
	other := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.1", Limit: ratelimit.PerMinute(100)}
	hs.onHold = func(int64) error {
		p.down.Store(true)
		// Another request finds the outage, and decides in process
		// once the lockouts in force are loaded.
		if _, err := f.AllowAll(context.Background(), other); err != nil {
			t.Error(err)
		}
		return errPartitioned
	}
	lock := ratelimit.HeldLock{Name: owner.Name, ID: owner.ID, Since: time.Now(), Until: time.Now().Add(time.Hour), Level: 1}
	if err := f.Hold(t.Context(), lock); err != nil {
		t.Fatal(err)
	}
	d, err := f.AllowAll(t.Context(), owner)
	if !f.Degraded() {
		t.Fatal("not degraded while cut off")
	}
	if err != nil || d.Allowed {
		t.Fatalf("the owner, locked by an administrator as the outage began: %+v, %v; want refused as locked", d.Results, err)
	}
}
