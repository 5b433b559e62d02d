package ratelimit

import "time"

// lockTable is a shard's locks: one least-recently-used order per group
// (a rule's name, or its name and a class of its identities:
// LockoutPolicy.Group), under one bound for them all. When full, a new
// lock pushes out the least recently used lock of the group that holds
// the most, so that
// a flood of one rule's locks (cheap ones, such as failed API key checks
// from many networks) pushes out its own rather than another rule's,
// while no rule is ever refused a place: a rule holding fewer finds one
// taken from the largest. The locks restored from the lockout log when
// Redis was lost (Local.Hold) are kept apart, pinned, and pushed out by
// nothing while in force: they may be most of the table, and a flood
// would otherwise take from them. Their number is what the log held.
type lockTable struct {
	max     int
	n       int
	byGroup map[string]*lru[*localLock]
	pinned  map[string]pinnedLock // by key
}

type pinnedLock struct {
	group string
	lk    *localLock
}

func newLockTable(max int) lockTable {
	return lockTable{max: max, byGroup: make(map[string]*lru[*localLock]), pinned: make(map[string]pinnedLock)}
}

// get returns the lock of identity key in group g and marks it used.
func (t *lockTable) get(g, key string) (*localLock, bool) {
	if p, ok := t.pinned[key]; ok {
		return p.lk, true
	}
	c := t.byGroup[g]
	if c == nil {
		return nil, false
	}
	return c.get(key)
}

// add stores a lock that is not present.
func (t *lockTable) add(g, key string, lk *localLock) {
	if t.n >= t.max {
		var largest *lru[*localLock]
		for _, c := range t.byGroup {
			if largest == nil || c.len() > largest.len() {
				largest = c
			}
		}
		largest.removeOldest()
		t.n--
	}
	c := t.byGroup[g]
	if c == nil {
		// Its own bound is the table's, which add keeps.
		l := newLRU[*localLock](t.max + 1)
		c = &l
		t.byGroup[g] = c
	}
	c.add(key, lk)
	t.n++
}

// pin keeps lk, the lock of identity key in group g, apart from the
// others until unpin finds it ended.
func (t *lockTable) pin(g, key string, lk *localLock) {
	if c := t.byGroup[g]; c != nil {
		if _, ok := c.items[key]; ok {
			c.remove(key)
			t.n--
		}
	}
	t.pinned[key] = pinnedLock{g, lk}
}

// unpin returns the pinned locks that have ended at now to the others,
// where they keep their level until pushed out.
func (t *lockTable) unpin(now time.Time) {
	for key, p := range t.pinned {
		if !now.Before(p.lk.until) {
			delete(t.pinned, key)
			t.add(p.group, key, p.lk)
		}
	}
}

// len is how many locks t holds, pinned or not.
func (t *lockTable) len() int { return t.n + len(t.pinned) }
