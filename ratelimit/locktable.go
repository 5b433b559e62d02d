package ratelimit

import (
	"strings"
	"time"
)

// lockTable is a shard's locks, in groups under one bound (groupedLRU),
// so that a flood of one group's locks (cheap ones, such as failed API
// key checks from many networks, or an application's accounts failed at
// will) pushes out its own rather than another group's. The locks
// restored from the lockout log when Redis was lost (Local.Hold) are kept
// apart, pinned, and pushed out by nothing while in force: they may be
// most of the table, and a flood would otherwise take from them. Their
// number is what the log held.
type lockTable struct {
	groupedLRU[*localLock]
	pinned map[string]pinnedLock // by key
}

type pinnedLock struct {
	group string
	lk    *localLock
}

func newLockTable(max int) lockTable {
	return lockTable{groupedLRU: newGroupedLRU[*localLock](max), pinned: make(map[string]pinnedLock)}
}

// get returns the lock of identity key in group g and marks it used.
func (t *lockTable) get(g, key string) (*localLock, bool) {
	if p, ok := t.pinned[key]; ok {
		return p.lk, true
	}
	return t.groupedLRU.get(g, key)
}

// pin keeps lk, the lock of identity key in group g, apart from the
// others until unpin finds it ended.
func (t *lockTable) pin(g, key string, lk *localLock) {
	t.remove(g, key)
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

// end ends, at now, every lock in force, pinned or not, of the rules
// named reports (every rule's if it is nil), keeping its level.
func (t *lockTable) end(now time.Time, named func(name string) bool) {
	stop := func(g string, lk *localLock) {
		// A group is its rule's name, or the name, a space and a class.
		name, _, _ := strings.Cut(g, " ")
		if now.Before(lk.until) && (named == nil || named(name)) {
			lk.until = now
		}
	}
	t.each(stop)
	for _, p := range t.pinned {
		stop(p.group, p.lk)
	}
	t.unpin(now)
}

// len is how many locks t holds, pinned or not.
func (t *lockTable) len() int { return t.groupedLRU.len() + len(t.pinned) }
