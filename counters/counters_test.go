package counters

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/testenv"
)

func TestSpan(t *testing.T) {
	for _, tc := range []struct {
		name                string
		first, last         int64
		wantMinutes, wantHr int
	}{
		{"five minutes inside an hour", 125, 129, 5, 0},
		{"one whole hour", 120, 179, 0, 1},
		{"an hour across a boundary", 150, 209, 60, 0},
		{"a day, aligned", 0, 1439, 0, 24},
		{"a day, not aligned", 61, 1500, 59 + 1, 23},
	} {
		t.Run(tc.name, func(t *testing.T) {
			minutes, hours := span(tc.first, tc.last)
			if len(minutes) != tc.wantMinutes || len(hours) != tc.wantHr {
				t.Fatalf("span(%d, %d): %d minutes, %d hours; want %d and %d", tc.first, tc.last, len(minutes), len(hours), tc.wantMinutes, tc.wantHr)
			}
			covered := map[int64]int{}
			for _, m := range minutes {
				covered[m]++
			}
			for _, h := range hours {
				for m := h * 60; m < h*60+60; m++ {
					covered[m]++
				}
			}
			for m := tc.first; m <= tc.last; m++ {
				if covered[m] != 1 {
					t.Errorf("minute %d covered %d times, want once", m, covered[m])
				}
				delete(covered, m)
			}
			if len(covered) != 0 {
				t.Errorf("minutes outside [%d, %d] covered: %v", tc.first, tc.last, covered)
			}
		})
	}
}

// statsBackends are the Redis deployments Stats must work on: every key
// shares one hash tag, so its transactions work on a cluster too.
func statsBackends(t *testing.T) map[string]func(t *testing.T) (redis.UniversalClient, string) {
	return map[string]func(t *testing.T) (redis.UniversalClient, string){
		"standalone": func(t *testing.T) (redis.UniversalClient, string) { return testenv.Redis(t) },
		"cluster":    func(t *testing.T) (redis.UniversalClient, string) { return testenv.RedisCluster(t) },
	}
}

// TestStatsSumsExactly counts events at chosen instants and checks that
// each period sums exactly the minutes it covers, no more, whether the
// sums read minute or hour keys.
func TestStatsSumsExactly(t *testing.T) {
	for name, backend := range statsBackends(t) {
		t.Run(name, func(t *testing.T) {
			rdb, prefix := backend(t)
			s, err := New(rdb, prefix)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Date(2025, 3, 10, 12, 34, 30, 0, time.UTC)
			at := func(ago time.Duration) time.Time { return now.Add(-ago) }
			var batch []auth.Event
			add := func(n int, when time.Time, e auth.Event) {
				for range n {
					e.At = when
					batch = append(batch, e)
				}
			}
			// Inside 5m: the current minute and 4 minutes back.
			add(3, at(0), auth.Event{Kind: auth.EventLoginSucceeded, Account: "a@example.com", Source: "192.0.2.1"})
			add(4, at(4*time.Minute), auth.Event{Kind: auth.EventLoginFailed, Account: "b@example.com", Source: "192.0.2.2"})
			add(2, at(time.Minute), auth.Event{Kind: auth.EventLoginRejected, Rule: auth.RuleLoginIP, Account: "c@example.com", Source: "192.0.2.3"})
			add(1, at(time.Minute), auth.Event{Kind: auth.EventLoginInvalid, Source: "192.0.2.3"})
			add(5, at(2*time.Minute), auth.Event{Kind: auth.EventResetRejected, Rule: auth.RuleResetIP, Account: "d@example.com", Source: "192.0.2.4"})
			// Just outside 5m, inside 1h.
			add(7, at(5*time.Minute), auth.Event{Kind: auth.EventLoginRejected, Rule: auth.RuleLockout, Account: "b@example.com", Source: "192.0.2.5"})
			add(1, at(59*time.Minute), auth.Event{Kind: auth.EventLockout, Account: "b@example.com"})
			// Just outside 1h, inside 24h, in a whole hour.
			add(11, at(3*time.Hour), auth.Event{Kind: auth.EventLoginRejected, Rule: auth.RuleLoginAccount, Account: "e@example.com", Source: "192.0.2.6"})
			// The first minute of the 24 hours, and the one before it.
			add(13, at(1439*time.Minute), auth.Event{Kind: auth.EventLoginFailed, Account: "f@example.com"})
			add(17, at(1440*time.Minute), auth.Event{Kind: auth.EventLoginFailed, Account: "g@example.com"})
			add(2, at(30*time.Minute), auth.Event{Kind: auth.EventResetRequested, Account: "h@example.com"})
			// Counted in two batches, as the Recorder does.
			if err := s.CountEvents(t.Context(), batch[:len(batch)/2]); err != nil {
				t.Fatal(err)
			}
			if err := s.CountEvents(t.Context(), batch[len(batch)/2:]); err != nil {
				t.Fatal(err)
			}

			type figures struct {
				Attempts, Successes, Failures, Invalid, Rejected, Lockouts, Resets int64
				LoginIP, LoginAccount, Lockout, ResetIP                            int64
			}
			for _, tc := range []struct {
				p    dashboard.Period
				want figures
			}{
				{dashboard.Period5m, figures{Attempts: 3 + 4 + 2 + 1, Successes: 3, Failures: 4, Invalid: 1, Rejected: 2, LoginIP: 2, ResetIP: 5}},
				{dashboard.Period1h, figures{Attempts: 10 + 7, Successes: 3, Failures: 4, Invalid: 1, Rejected: 2 + 7, Lockouts: 1, Resets: 2, LoginIP: 2, Lockout: 7, ResetIP: 5}},
				{dashboard.Period24h, figures{Attempts: 17 + 11 + 13, Successes: 3, Failures: 4 + 13, Invalid: 1, Rejected: 9 + 11, Lockouts: 1, Resets: 2, LoginIP: 2, LoginAccount: 11, Lockout: 7, ResetIP: 5}},
			} {
				t.Run(tc.p.String(), func(t *testing.T) {
					sum, err := s.Summary(t.Context(), tc.p, now)
					if err != nil {
						t.Fatal(err)
					}
					got := figures{sum.Attempts, sum.Successes, sum.Failures, sum.Invalid, sum.Rejected, sum.Lockouts, sum.ResetRequests,
						sum.RejectedByRule[auth.RuleLoginIP], sum.RejectedByRule[auth.RuleLoginAccount], sum.RejectedByRule[auth.RuleLockout], sum.RejectedByRule[auth.RuleResetIP]}
					if got != tc.want {
						t.Errorf("got  %+v\nwant %+v", got, tc.want)
					}
					if len(sum.RejectedByRule) != len(auth.RejectionRules()) {
						t.Errorf("RejectedByRule has %d rules, want all %d: %v", len(sum.RejectedByRule), len(auth.RejectionRules()), sum.RejectedByRule)
					}
					if want := now.Truncate(time.Minute).Add(time.Minute); !sum.To.Equal(want) || !sum.From.Equal(want.Add(-time.Duration(tc.p)*time.Minute)) {
						t.Errorf("window %s to %s, want %d minutes ending %s", sum.From, sum.To, tc.p, want)
					}
				})
			}

			series, err := s.Series(t.Context(), dashboard.SeriesMinutes, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(series) != dashboard.SeriesMinutes || !series[dashboard.SeriesMinutes-1].Start.Equal(now.Truncate(time.Minute)) {
				t.Fatalf("series of %d minutes ending %v", len(series), series[len(series)-1].Start)
			}
			wantSeries := map[int]dashboard.Minute{0: {Attempts: 3}, 1: {Attempts: 3, Rejected: 2}, 4: {Attempts: 4}, 5: {Attempts: 7, Rejected: 7}}
			for i, m := range series {
				ago := dashboard.SeriesMinutes - 1 - i
				w := wantSeries[ago]
				if m.Attempts != w.Attempts || m.Rejected != w.Rejected {
					t.Errorf("%d minutes ago: %d attempts, %d rejected; want %d and %d", ago, m.Attempts, m.Rejected, w.Attempts, w.Rejected)
				}
			}

			for _, tc := range []struct {
				p    dashboard.Period
				kind TopKind
				want string
			}{
				{dashboard.Period5m, TopSources, "[{192.0.2.4 5} {192.0.2.3 2}]"},
				{dashboard.Period1h, TopSources, "[{192.0.2.5 7} {192.0.2.4 5} {192.0.2.3 2}]"},
				{dashboard.Period5m, TopAccounts, "[{d@example.com 5} {b@example.com 4} {c@example.com 2}]"},
				{dashboard.Period1h, TopAccounts, "[{b@example.com 11} {d@example.com 5} {c@example.com 2}]"},
				// 24 h ranks whole hours, so the minute just before the
				// window (g@) counts with the rest of its hour.
				{dashboard.Period24h, TopAccounts, "[{g@example.com 17} {f@example.com 13} {e@example.com 11} {b@example.com 11} {d@example.com 5} {c@example.com 2}]"},
			} {
				got, err := s.Top(t.Context(), tc.p, tc.kind, 10, now)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != tc.want {
					t.Errorf("Top(%s, %s) = %v, want %s", tc.p, tc.kind, got, tc.want)
				}
			}
			if got, _ := s.Top(t.Context(), dashboard.Period1h, TopSources, 1, now); fmt.Sprint(got) != "[{192.0.2.5 7}]" {
				t.Errorf("Top 1 = %v", got)
			}

			snap, err := s.Snapshot(t.Context(), dashboard.Period1h, now, 10)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Summary.Attempts != 17 || len(snap.Series) != dashboard.SeriesMinutes || len(snap.TopSources) != 3 || len(snap.TopAccounts) != 3 {
				t.Errorf("Snapshot: %+v", snap)
			}
			checkExpiry(t, rdb, prefix)
		})
	}
}

// checkExpiry fails for any stats key without a time to live, the kept
// rankings and their locks included.
func checkExpiry(t *testing.T, rdb redis.UniversalClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	check := func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			ttl, err := node.TTL(ctx, key).Result()
			if err != nil {
				return err
			}
			if ttl <= 0 {
				t.Errorf("key %s has TTL %v", key, ttl)
			}
		}
		return iter.Err()
	}
	var err error
	if c, ok := rdb.(*redis.ClusterClient); ok {
		err = c.ForEachMaster(ctx, check)
	} else {
		err = check(ctx, rdb.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestStatsRankingsAreBounded floods one minute with more distinct sources
// than a sorted set keeps: the set stays at its cap and the heaviest
// source stays on top.
func TestStatsRankingsAreBounded(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	s, err := New(rdb, prefix)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 3, 10, 12, 34, 30, 0, time.UTC)
	batch := make([]auth.Event, 0, minuteRankCap+600)
	for i := range minuteRankCap + 500 {
		batch = append(batch, auth.Event{At: now, Kind: auth.EventLoginRejected, Rule: auth.RuleLoginIP, Source: fmt.Sprintf("10.%d.%d.1", i/256, i%256)})
	}
	for range 100 {
		batch = append(batch, auth.Event{At: now, Kind: auth.EventLoginRejected, Rule: auth.RuleLoginIP, Source: "192.0.2.99"})
	}
	if err := s.CountEvents(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	if n := rdb.ZCard(t.Context(), s.minuteKey(string(TopSources), unixMinute(now))).Val(); n != minuteRankCap {
		t.Errorf("minute set holds %d members, want the cap %d", n, minuteRankCap)
	}
	top, err := s.Top(t.Context(), dashboard.Period5m, TopSources, 1, now)
	if err != nil || len(top) != 1 || top[0] != (dashboard.Ranked{Name: "192.0.2.99", Count: 100}) {
		t.Errorf("Top = %v, %v; want 192.0.2.99 with 100", top, err)
	}
	sum, err := s.Summary(t.Context(), dashboard.Period5m, now)
	if err != nil || sum.Rejected != int64(len(batch)) {
		t.Errorf("Rejected = %d, %v; want %d: the counters are never capped", sum.Rejected, err, len(batch))
	}
}

func TestStatsRefusesBadInput(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	s, err := New(rdb, prefix)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := s.Summary(t.Context(), dashboard.Period(7), now); err != dashboard.ErrInvalidPeriod {
		t.Errorf("Summary(7 minutes): %v", err)
	}
	if _, err := s.Top(t.Context(), dashboard.Period5m, TopKind("x"), 3, now); err == nil {
		t.Error("Top of an unknown ranking: no error")
	}
	if _, err := s.Series(t.Context(), 0, now); err == nil {
		t.Error("Series of 0 minutes: no error")
	}
}

// TestRankingsKeepASteadySource: a source rejected a little in every
// batch, over a period, outranks one-off sources that flood its sets
// past their cap with more each than it has in any one batch. A set
// that dropped its lowest to stay within its cap would drop the steady
// source in every batch, each time from nothing, and the flood would
// hide the period's heaviest source from both rankings at the cost of
// two rejections per set member.
func TestRankingsKeepASteadySource(t *testing.T) {
	for _, tc := range []struct {
		name   string
		period dashboard.Period
		cap    int
	}{
		{"minute sets", dashboard.Period5m, minuteRankCap},
		{"hour sets", dashboard.Period24h, hourRankCap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb, prefix := testenv.Redis(t)
			s, err := New(rdb, prefix)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Date(2025, 3, 10, 12, 34, 30, 0, time.UTC)
			start := now.Truncate(time.Minute)
			flood := make([]auth.Event, 0, 2*tc.cap)
			for i := range tc.cap {
				e := auth.Event{At: start, Kind: auth.EventLoginRejected, Rule: auth.RuleLoginIP,
					Source: fmt.Sprintf("10.%d.%d.1", i/256, i%256), Account: fmt.Sprintf("flood%d@example.com", i)}
				flood = append(flood, e, e)
			}
			if err := s.CountEvents(t.Context(), flood); err != nil {
				t.Fatal(err)
			}
			const steady = 25
			for i := range steady {
				e := auth.Event{At: start.Add(time.Duration(i) * time.Second), Kind: auth.EventLoginRejected, Rule: auth.RuleLoginIP,
					Source: "192.0.2.99", Account: "victim@example.com"}
				if err := s.CountEvents(t.Context(), []auth.Event{e}); err != nil {
					t.Fatal(err)
				}
			}
			for _, kind := range []TopKind{TopSources, TopAccounts} {
				top, err := s.Top(t.Context(), tc.period, kind, 1, now)
				if err != nil {
					t.Fatal(err)
				}
				want := map[TopKind]string{TopSources: "192.0.2.99", TopAccounts: "victim@example.com"}[kind]
				if len(top) != 1 || top[0].Name != want || top[0].Count < steady {
					t.Errorf("%s: Top = %v; want %s with at least %d", kind, top, want, steady)
				}
			}
		})
	}
}
