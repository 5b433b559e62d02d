package attack

import (
	"math/rand/v2"
	"testing"
)

// TestTripperIsTripAny: the thresholds worked out once for a baseline
// trip exactly where TripAny does, for windows and baselines of every
// size, with the long window and without, and are reused while the
// baseline stays the same.
func TestTripperIsTripAny(t *testing.T) {
	noLong := DefaultConfig()
	noLong.LongWindow = 0
	rng := rand.New(rand.NewPCG(17, 5))
	counts := func(scale int64) Counts {
		n := func() int64 { return rng.Int64N(scale + 1) }
		return Counts{Attempts: n(), Failures: n(), Unknown: n(), Rejected: n(), Held: n() / 8, Successes: n(), Steps: n()}
	}
	for _, c := range []Config{DefaultConfig(), noLong} {
		var tr tripper
		seen := map[Trigger]bool{}
		for i := range 20_000 {
			scale := int64(1) << (i % 20)
			sum := counts(scale)
			if i%3 == 0 {
				sum = tr.sum // the baseline of the last attempt, as within a minute
			}
			tr = c.tripperFor(tr, sum)
			if tr.sum != sum {
				t.Fatalf("tripper of %+v, want of %+v", tr.sum, sum)
			}
			window, long := counts(scale), counts(scale*4)
			gotTrig, gotOK := c.trip(tr, window, long)
			wantTrig, wantOK := c.TripAny(c.signals(window, long, sum))
			if gotTrig != wantTrig || gotOK != wantOK {
				t.Fatalf("window %+v, long %+v, baseline sum %+v: trip %q %v, TripAny %q %v",
					window, long, sum, gotTrig, gotOK, wantTrig, wantOK)
			}
			seen[gotTrig] = true
		}
		want := 3 // no trip, and either short signal
		if c.LongWindow != 0 {
			want = 5
		}
		if len(seen) != want {
			t.Errorf("LongWindow %v: only %v seen", c.LongWindow, seen)
		}
	}
}
