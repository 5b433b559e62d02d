package ratelimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// TestFailbackBacksOffWhileRedisRefusesWrites: a Redis that answers PING
// but refuses every write (a replica after a failover, READONLY; a master
// short of replicas, NOREPLICAS) does not take the limits back, and each
// failback that fails reads the whole lockout log and logs an error: they
// are not tried four times a second for as long as it lasts.
func TestFailbackBacksOffWhileRedisRefusesWrites(t *testing.T) {
	f, hs, p, _ := hookedReplica(t)
	var reads atomic.Int64
	f.Restore = func(context.Context) ([]ratelimit.HeldLock, error) {
		reads.Add(1)
		return []ratelimit.HeldLock{{Name: owner.Name, ID: owner.ID, Until: time.Now().Add(time.Hour), Level: 1}}, nil
	}
	var refusing atomic.Bool
	refusing.Store(true)
	hs.onHold = func(int64) error {
		if refusing.Load() {
			return replyErr("NOREPLICAS Not enough good replicas to write.")
		}
		return nil
	}
	p.down.Store(true)
	if _, err := f.AllowAll(t.Context(), owner); err != nil {
		t.Fatal(err)
	}
	p.down.Store(false) // PING answers; writes are refused
	time.Sleep(4 * time.Second)
	if !f.Degraded() {
		t.Fatal("limits handed back to a Redis that refuses writes")
	}
	// One read for the outage's load, and the failbacks': at 250 ms,
	// 500 ms, 1 s and 2 s after each other at most.
	if n := reads.Load(); n > 6 {
		t.Errorf("%d reads of the lockout log in 4 s while Redis refused writes; want the failbacks to back off", n)
	}
	// Once Redis takes writes again, the limits go back to it.
	refusing.Store(false)
	waitRecovered(t, f)
}
