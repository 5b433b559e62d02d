package auth

import (
	"fmt"
	"testing"
	"time"
)

// TestDeviceCacheFullOfLiveAnswersStartsOver: a cache holding
// deviceCacheMax answers, none of them expired, starts over rather than
// refusing every new answer, as the session cache does: it keeps
// remembering the devices of the moment, and a put costs no scan of the
// whole map each time.
func TestDeviceCacheFullOfLiveAnswersStartsOver(t *testing.T) {
	var c deviceCache
	now := time.Unix(1_800_000_000, 0)
	for i := range deviceCacheMax {
		c.put(fmt.Sprint("old", i), true, now)
	}
	c.put("new", true, now)
	if known, ok := c.get("new", now); !ok || !known {
		t.Errorf("the answer put into a full cache: known %v, remembered %v; want it remembered", known, ok)
	}
	if len(c.m) > deviceCacheMax {
		t.Errorf("%d answers remembered, want at most %d", len(c.m), deviceCacheMax)
	}
}
