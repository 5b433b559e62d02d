package ratelimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// TestFlappingRedisBacksOffFailbacks: a Redis that takes each failback and
// is lost again at the next decision (a crash loop, a link that drops its
// connections) is not given the limits back four times a second: each
// failback, and each outage's load, reads the whole lockout log and puts
// every lock in force into Redis. The failbacks that follow an outage
// begun soon after the last one back off as those Redis refused do.
func TestFlappingRedisBacksOffFailbacks(t *testing.T) {
	f, _, p, _ := hookedReplica(t)
	var reads atomic.Int64
	f.Restore = func(context.Context) ([]ratelimit.HeldLock, error) {
		reads.Add(1)
		return []ratelimit.HeldLock{{Name: owner.Name, ID: owner.ID, Until: time.Now().Add(time.Hour), Level: 1}}, nil
	}
	_, backs := countChanges(f)
	stop := make(chan struct{})
	flapped := make(chan struct{})
	go func() {
		defer close(flapped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if f.Degraded() {
				continue
			}
			// Back on Redis: the next decision finds it gone again.
			p.down.Store(true)
			_, _ = f.AllowAll(context.Background(), ratelimit.Rule{Name: "login_ip", ID: "192.0.2.1", Limit: ratelimit.PerMinute(1000)})
			p.down.Store(false)
		}
	}()
	time.Sleep(4 * time.Second)
	close(stop)
	<-flapped
	// Failbacks at most 250 ms, 500 ms, 1 s and 2 s after each other.
	if n := backs.Load(); n > 6 {
		t.Errorf("%d failbacks (%d reads of the lockout log) in 4 s to a Redis lost again after each; want them to back off", n, reads.Load())
	}
	p.down.Store(false)
	waitRecovered(t, f)
}
