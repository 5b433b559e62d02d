package counters

import (
	"testing"
	"time"

	"github.com/xcloak/xcloak/dashboard"
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
