package ratelimit

import (
	"testing"
	"time"
)

// Two unlocks of one identity while Redis is away note their times after
// their calls to Redis have failed, in whichever order those calls came
// back. The entry they share keeps the later time, whatever the order of
// noting: moved earlier, it would not end at the failback a lock another
// replica made in Redis between the two unlocks' times, which the later
// unlock ended.
func TestUnlockNotedLateKeepsTheLaterTime(t *testing.T) {
	f := &Failover{}
	early := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	late := early.Add(time.Second)
	f.noteCleared("login_account", "ann", late)
	f.noteCleared("login_account", "ann", early)
	if len(f.cleared) != 1 {
		t.Fatalf("%d unlocks kept for one identity, want 1: %+v", len(f.cleared), f.cleared)
	}
	if got := f.cleared[0].at; !got.Equal(late) {
		t.Fatalf("the unlock kept is at %v, want the later %v", got, late)
	}
}
