package ratelimit_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

// TestLogReadUnderOtherLimits plants logs as a rule of one limit and window
// (and entry width) left them, some with entries ahead of Redis' clock, and
// decides them under other limits and windows, one after another, as
// replicas of different settings would. Each verdict is checked against the
// log it was made on: counted in the deciding rule's own window, admitted
// exactly when that count is below its limit, and a rejection's retry-after
// exactly the time until the entry that must leave does leave (a retry
// then is admitted, one before it is not). No admission drops an entry
// its own window counts.
func TestLogReadUnderOtherLimits(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLimiter(t, rdb, prefix)
	k, _ := ratelimit.NewKeys(prefix, "login_ip")
	rng := rand.New(rand.NewPCG(7, 11))
	windows := []time.Duration{time.Minute, 10 * time.Minute, 40 * time.Minute, 2 * time.Hour, 7 * 24 * time.Hour, ratelimit.MaxWindow}
	counts := []int{1, 2, 3, 5, 8, 300}
	second := int64(time.Second / time.Microsecond)
	for trial := range 300 {
		id := fmt.Sprint("trial", trial)
		key := k.Log(id)
		now := redisTime(t, rdb)
		// The planted log: as a rule of window w0 left it, its entries
		// spread over the last two such windows, a few maybe ahead.
		w0 := windows[rng.IntN(len(windows))]
		n := rng.IntN(12)
		if rng.IntN(4) == 0 {
			n = 250 + rng.IntN(200)
		}
		gap := max(w0.Microseconds()/int64(n+1), 20_000)
		tm := now - 2*w0.Microseconds()
		if rng.IntN(5) == 0 {
			tm = now - w0.Microseconds()/2 + rng.Int64N(w0.Microseconds()) // some ahead
		}
		var times []int64
		for range n {
			tm += 1 + rng.Int64N(gap)
			times = append(times, tm)
		}
		width := 4
		for span := int64(2 * w0.Microseconds()); width < 6 && span >= 1<<(8*width); width++ {
		}
		if len(times) > 0 && times[len(times)-1]-times[0] >= 1<<(8*width) {
			width = 6
		}
		if len(times) > 0 {
			if err := rdb.Set(t.Context(), key, ratelimit.EncodeLog(width, times[0], times...), 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.PExpireAt(t.Context(), key, time.UnixMicro(times[len(times)-1]+w0.Microseconds()+second)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for step := range 6 {
			lims := []ratelimit.Limit{{Count: counts[rng.IntN(len(counts))], Window: windows[rng.IntN(len(windows))]}}
			if rng.IntN(3) == 0 {
				// The same log named by a second rule of other settings, in
				// one request.
				lims = append(lims, ratelimit.Limit{Count: counts[rng.IntN(len(counts))], Window: windows[rng.IntN(len(windows))]})
			}
			var rules []ratelimit.Rule
			for _, lim := range lims {
				rules = append(rules, ratelimit.Rule{Name: "login_ip", ID: id, Limit: lim})
			}
			log := logEntries(t, rdb, key)
			before := redisTime(t, rdb)
			d, err := l.AllowAll(t.Context(), rules...)
			after := redisTime(t, rdb)
			where := fmt.Sprintf("trial %d step %d: log of %d (width %d, planted under %s) read under %v", trial, step, len(log), width, w0, lims)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			ambiguous, admit := false, true
			for _, lim := range lims {
				W := lim.Window.Microseconds()
				lo, hi := len(log)-sortSearch(log, after-W), len(log)-sortSearch(log, before-W)
				ambiguous = ambiguous || lo != hi
				admit = admit && lo < lim.Count
			}
			if ambiguous {
				continue // an entry left a window during the call
			}
			if d.Allowed != admit {
				t.Fatalf("%s: %+v; want admitted %v", where, d, admit)
			}
			for i, lim := range lims {
				r := d.Results[i]
				W := lim.Window.Microseconds()
				count := len(log) - sortSearch(log, before-W)
				switch {
				case admit:
					if !r.Allowed || r.Count != count+1 {
						t.Fatalf("%s: rule %d: %+v; want admitted as %d", where, i, r, count+1)
					}
					got := logEntries(t, rdb, key)
					// Every entry that a deciding window counts is kept.
					for _, e := range log {
						if e > after-W && !slices.Contains(got, e) {
							t.Fatalf("%s: entry %d dropped, still within %d µs", where, e, W)
						}
					}
				case count < lim.Count:
					if !r.Allowed || r.Count != count {
						t.Fatalf("%s: rule %d: %+v; want it to admit at %d", where, i, r, count)
					}
				default:
					if r.Allowed || r.Count != count {
						t.Fatalf("%s: rule %d: %+v; want rejected at %d", where, i, r, count)
					}
					leaves := log[len(log)-lim.Count] + W
					got := r.RetryAfter.Microseconds()
					if got <= 0 || got < leaves-after || got > leaves-before {
						t.Fatalf("%s: rule %d: retry-after %d µs, want within [%d, %d] µs", where, i, got, leaves-after, leaves-before)
					}
				}
			}
			if !admit {
				if raw := logEntries(t, rdb, key); !slices.Equal(raw, log) {
					t.Fatalf("%s: a rejection changed the log", where)
				}
			}
		}
	}
}

// sortSearch is the index of the first of times (ascending) after t.
func sortSearch(times []int64, t int64) int {
	i, _ := slices.BinarySearch(times, t+1)
	return i
}
