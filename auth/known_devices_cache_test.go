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
		c.put(fmt.Sprint("old", i), true, 0, now)
	}
	c.put("new", true, 0, now)
	if known, ok := c.get("new", now); !ok || !known {
		t.Errorf("the answer put into a full cache: known %v, remembered %v; want it remembered", known, ok)
	}
	if len(c.m) > deviceCacheMax {
		t.Errorf("%d answers remembered, want at most %d", len(c.m), deviceCacheMax)
	}
}

// TestDeviceCacheKeepsNoAnswerReadBeforeAPurge: an answer read from the
// store before a revocation purged the cache (a sign-out everywhere, a
// password change) is not remembered when it arrives after the purge, as
// the session cache's generations keep it: it would count a forgotten
// device as known on this replica for another deviceCacheTTL.
func TestDeviceCacheKeepsNoAnswerReadBeforeAPurge(t *testing.T) {
	var c deviceCache
	now := time.Unix(1_800_000_000, 0)
	gen := c.generation() // the lookup begins
	c.purge()             // a revocation while the store is read
	c.put("ann@example.com\x00nonce", true, gen, now)
	if known, ok := c.get("ann@example.com\x00nonce", now); ok {
		t.Errorf("an answer read before the purge is remembered (known %v)", known)
	}
	c.put("ann@example.com\x00nonce", true, c.generation(), now)
	if _, ok := c.get("ann@example.com\x00nonce", now); !ok {
		t.Error("an answer read after the purge is not remembered")
	}
}
