package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

// TestRejectionsFullSweepsRarely: once the memory is full of rejections
// that all last, remembering one more must not scan it again on every
// call. A flood over more identities than the bound would otherwise cost
// a scan of every memory, under the lock every decision takes, per
// rejection.
func TestRejectionsFullSweepsRarely(t *testing.T) {
	const max = 1000
	r := newRejections(time.Minute, max)
	now := time.Unix(1_700_000_000, 0)
	for i := range max {
		r.remember(ruleID{"k", fmt.Sprint(i)}, time.Minute, false, false, now.Add(time.Duration(i)*time.Millisecond), 0)
	}
	for i := range 10 * max {
		r.remember(ruleID{"new", fmt.Sprint(i)}, time.Minute, false, false, now.Add(2*time.Second), 0)
	}
	if r.sweeps > 1 {
		t.Fatalf("%d sweeps of a memory whose rejections all last; want at most 1", r.sweeps)
	}
	if _, ok := r.until[ruleID{"new", "0"}]; ok {
		t.Fatal("a rejection remembered past the bound")
	}
	// Once the oldest memory ends, a sweep makes room again.
	r.remember(ruleID{"later", ""}, time.Minute, false, false, now.Add(time.Minute+time.Millisecond), 0)
	if left, _ := r.lookup(ruleID{"later", ""}, now.Add(time.Minute+time.Millisecond)); left <= 0 {
		t.Fatal("no room made once the oldest memory ended")
	}
}
