package ratelimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/ratelimit"
)

// hangingPinger is a Redis whose pings, while p is down, get no answer
// before their bound: a host gone from the network.
type hangingPinger struct{ p *partition }

func (h hangingPinger) Ping(ctx context.Context) *redis.StatusCmd {
	cmd := redis.NewStatusCmd(ctx)
	if h.p.down.Load() {
		<-ctx.Done()
		cmd.SetErr(ctx.Err())
		return cmd
	}
	cmd.SetVal("PONG")
	return cmd
}

// slowOnce is a partitioned store whose next decision, once slow is set,
// is answered late (IsSlow).
type slowOnce struct {
	partitioned
	slow atomic.Bool
}

func (s *slowOnce) AllowAll(ctx context.Context, rules ...ratelimit.Rule) (ratelimit.Decision, error) {
	if s.slow.CompareAndSwap(true, false) {
		return ratelimit.Decision{}, context.DeadlineExceeded
	}
	return s.partitioned.AllowAll(ctx, rules...)
}

// TestSlowAnswersPingsDoNotEndTheNextFailback: the pings that check a
// slow answer (three, a second each at most) can outlast an outage that
// a decision found meanwhile: once the probe has handed the limits back
// to Redis, the last of those pings, sent while Redis was away, does not
// take it away again. On the bubble's clock: the slow answer and the
// outage at 0 s, its pings at 0, 1.25 and 2.5 s, each unanswered for a
// second; Redis back at 2.6 s, the failback at 3 s.
func TestSlowAnswersPingsDoNotEndTheNextFailback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &partition{}
		shared := &slowOnce{partitioned: partitioned{newLocal(t), p}}
		f := ratelimit.NewFailover(shared, newLocal(t), hangingPinger{p}, ratelimit.FailLocal, nil)
		t.Cleanup(f.Close)
		trips, backs := countChanges(f)
		p.down.Store(true)
		shared.slow.Store(true)
		if _, err := f.AllowAll(t.Context(), owner); err == nil {
			t.Fatal("a slow answer was not an error")
		}
		if _, err := f.AllowAll(t.Context(), owner); err != nil || !f.Degraded() {
			t.Fatalf("the outage: %v, degraded %v", err, f.Degraded())
		}
		time.Sleep(2600 * time.Millisecond)
		p.down.Store(false)
		time.Sleep(2400 * time.Millisecond)
		if n, b := trips.Load(), backs.Load(); n != 1 || b != 1 || f.Degraded() {
			t.Fatalf("one outage, Redis back at 2.6 s: %d trips, %d failbacks, degraded %v at 5 s; want 1, 1, false", n, b, f.Degraded())
		}
	})
}

// hangingCall is a partitioned store whose decisions for the identity
// "hung" wait for release, then fail as a dial that timed out does.
type hangingCall struct {
	partitioned
	release chan struct{}
}

func (h *hangingCall) AllowAll(ctx context.Context, rules ...ratelimit.Rule) (ratelimit.Decision, error) {
	if rules[0].ID == "hung" {
		<-h.release
		return ratelimit.Decision{}, errPartitioned
	}
	return h.partitioned.AllowAll(ctx, rules...)
}

// TestLateFailureDoesNotEndTheNextFailback: a decision sent to Redis
// before an outage that another found, whose failure arrives only after
// the probe handed the limits back (a dial that waited out its bound),
// is decided by the policy, but does not take Redis away again: the
// failback since found it answering.
func TestLateFailureDoesNotEndTheNextFailback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &partition{}
		shared := &hangingCall{partitioned: partitioned{newLocal(t), p}, release: make(chan struct{})}
		f := ratelimit.NewFailover(shared, newLocal(t), hangingPinger{p}, ratelimit.FailLocal, nil)
		t.Cleanup(f.Close)
		trips, backs := countChanges(f)
		hung := make(chan error, 1)
		go func() {
			_, err := f.AllowAll(context.Background(), ratelimit.Rule{Name: "login_ip", ID: "hung", Limit: ratelimit.PerMinute(10)})
			hung <- err
		}()
		synctest.Wait()
		p.down.Store(true)
		if _, err := f.AllowAll(t.Context(), owner); err != nil || !f.Degraded() {
			t.Fatalf("the outage: %v, degraded %v", err, f.Degraded())
		}
		time.Sleep(time.Second)
		p.down.Store(false)
		time.Sleep(time.Second)
		if f.Degraded() || backs.Load() != 1 {
			t.Fatalf("Redis back: degraded %v, %d failbacks", f.Degraded(), backs.Load())
		}
		close(shared.release)
		if err := <-hung; err != nil {
			t.Fatalf("the late decision: %v; want it decided by the policy", err)
		}
		time.Sleep(time.Second)
		if n, b := trips.Load(), backs.Load(); n != 1 || b != 1 || f.Degraded() {
			t.Fatalf("one outage, a decision sent before it failing after its failback: %d trips, %d failbacks, degraded %v; want 1, 1, false", n, b, f.Degraded())
		}
	})
}
