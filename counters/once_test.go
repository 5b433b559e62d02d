package counters

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/testenv"
)

// errLost stands for a timeout, a dropped connection or a failover.
var errLost = errors.New("i/o timeout")

// failNext fails the client's next transaction, once: before sending it,
// or once Redis ran it, its answer lost.
type failNext struct{ unsent, unanswered atomic.Bool }

func (*failNext) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*failNext) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}

func (f *failNext) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "exec" }) {
			return next(ctx, cmds)
		}
		if f.unsent.Swap(false) {
			return lose(cmds)
		}
		err := next(ctx, cmds)
		if f.unanswered.Swap(false) {
			return lose(cmds)
		}
		return err
	}
}

func lose(cmds []redis.Cmder) error {
	for _, c := range cmds {
		c.SetErr(errLost)
	}
	return errLost
}

// TestBatchCountedOnce: a batch whose CountEvents failed, given again as
// the Recorder does until it succeeds, is counted once, whether Redis had
// counted it (its answer lost), had not, or had failed on one of its keys
// (of the wrong type: the rest of the batch is counted, once). The same
// events in a later batch are counted again.
func TestBatchCountedOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(*failNext, *redis.Client, *Stats, time.Time)
	}{
		{"not sent", func(f *failNext, _ *redis.Client, _ *Stats, _ time.Time) { f.unsent.Store(true) }},
		{"counted, the answer lost", func(f *failNext, _ *redis.Client, _ *Stats, _ time.Time) { f.unanswered.Store(true) }},
		{"a key of the wrong type", func(_ *failNext, rdb *redis.Client, s *Stats, now time.Time) {
			key := s.hourKey(string(TopAccounts), unixMinute(now)/60)
			if err := rdb.Set(context.Background(), key, "x", time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb, prefix := testenv.Redis(t)
			f := &failNext{}
			rdb.AddHook(f)
			s, err := New(rdb, prefix)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Date(2025, 3, 10, 12, 34, 30, 0, time.UTC)
			batch := []auth.Event{
				{At: now, Kind: auth.EventLoginFailed, Account: "a@example.com", Source: "192.0.2.1"},
				{At: now, Kind: auth.EventLoginRejected, Rule: auth.RuleLoginIP, Account: "b@example.com", Source: "192.0.2.2"},
			}
			tc.fail(f, rdb, s, now)
			if err := s.CountEvents(t.Context(), batch); err == nil {
				t.Fatal("CountEvents met no failure")
			}
			for i := 0; s.CountEvents(t.Context(), batch) != nil; i++ { // as the Recorder does
				if i == 3 {
					t.Fatal("the batch given again is never counted")
				}
			}
			sum, err := s.Summary(t.Context(), dashboard.Period5m, now)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Attempts != 2 || sum.Failures != 1 || sum.Rejected != 1 {
				t.Errorf("%d attempts, %d failures, %d rejected; want 2, 1 and 1: each event once", sum.Attempts, sum.Failures, sum.Rejected)
			}
			if top, _ := s.Top(t.Context(), dashboard.Period5m, TopSources, 1, now); len(top) != 1 || top[0].Count != 1 {
				t.Errorf("top sources %v, want the one rejection once", top)
			}
			if err := s.CountEvents(t.Context(), batch); err != nil && tc.name != "a key of the wrong type" {
				t.Fatal(err)
			}
			if sum, _ := s.Summary(t.Context(), dashboard.Period5m, now); sum.Attempts != 4 {
				t.Errorf("%d attempts after the same events in a new batch, want 4", sum.Attempts)
			}
			checkExpiry(t, rdb, prefix)
		})
	}
}
