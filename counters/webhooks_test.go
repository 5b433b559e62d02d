package counters

import (
	"testing"
	"time"

	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/testenv"
)

// TestWebhooksDroppedSum: the drops two replicas count add up in every
// period that covers them, and none outside it; the keys expire.
func TestWebhooksDroppedSum(t *testing.T) {
	for name, backend := range statsBackends(t) {
		t.Run(name, func(t *testing.T) {
			rdb, prefix := backend(t)
			replicas := make([]*Stats, 2)
			for i := range replicas {
				s, err := New(rdb, prefix)
				if err != nil {
					t.Fatal(err)
				}
				replicas[i] = s
			}
			now := time.Date(2025, 3, 10, 12, 34, 30, 0, time.UTC)
			for _, c := range []struct {
				s   *Stats
				ago time.Duration
				n   int64
			}{
				{replicas[0], 0, 3},
				{replicas[1], time.Minute, 4},
				{replicas[0], 30 * time.Minute, 5},
				{replicas[1], 3 * time.Hour, 6},
				{replicas[0], 25 * time.Hour, 100},
			} {
				if err := c.s.CountWebhooksDropped(t.Context(), now.Add(-c.ago), c.n); err != nil {
					t.Fatal(err)
				}
			}
			for p, want := range map[dashboard.Period]int64{dashboard.Period5m: 7, dashboard.Period1h: 12, dashboard.Period24h: 18} {
				sum, err := replicas[1].Summary(t.Context(), p, now)
				if err != nil {
					t.Fatal(err)
				}
				if sum.WebhooksDropped != want {
					t.Errorf("%s: WebhooksDropped = %d, want %d", p, sum.WebhooksDropped, want)
				}
			}
			checkExpiry(t, rdb, prefix)
		})
	}
}

// TestWebhooksDroppedCountedOnce: drops whose count failed, given again
// with the drops since as webhook.Sender does, are counted once, whether
// Redis had counted them (the answer lost) or not; and a replica whose
// mark of what it counted expired counts its next drops alone.
func TestWebhooksDroppedCountedOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(*failNext)
	}{
		{"not sent", func(f *failNext) { f.unsent.Store(true) }},
		{"counted, the answer lost", func(f *failNext) { f.unanswered.Store(true) }},
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
			if err := s.CountWebhooksDropped(t.Context(), now, 1); err != nil {
				t.Fatal(err)
			}
			tc.fail(f)
			if err := s.CountWebhooksDropped(t.Context(), now, 3); err == nil {
				t.Fatal("CountWebhooksDropped met no failure")
			}
			// The 3 again, and 2 dropped since.
			if err := s.CountWebhooksDropped(t.Context(), now, 5); err != nil {
				t.Fatal(err)
			}
			if sum, err := s.Summary(t.Context(), dashboard.Period5m, now); err != nil || sum.WebhooksDropped != 6 {
				t.Errorf("WebhooksDropped = %d (%v), want 6: each drop once", sum.WebhooksDropped, err)
			}
			if err := rdb.Del(t.Context(), s.droppedMark).Err(); err != nil {
				t.Fatal(err)
			}
			if err := s.CountWebhooksDropped(t.Context(), now, 4); err != nil {
				t.Fatal(err)
			}
			if sum, err := s.Summary(t.Context(), dashboard.Period5m, now); err != nil || sum.WebhooksDropped != 10 {
				t.Errorf("after the mark expired, WebhooksDropped = %d (%v), want 10", sum.WebhooksDropped, err)
			}
			checkExpiry(t, rdb, prefix)
		})
	}
}
