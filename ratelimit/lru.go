package ratelimit

import "container/list"

// lru is a map bounded to max entries that forgets the least recently used
// one to make room for a new one. It is not safe for concurrent use: Local
// guards each with its shard's lock.
type lru[V any] struct {
	max   int
	items map[string]*list.Element // of *lruEntry[V]
	order *list.List               // most recently used first
}

type lruEntry[V any] struct {
	key string
	val V
}

func newLRU[V any](max int) lru[V] {
	return lru[V]{max: max, items: make(map[string]*list.Element), order: list.New()}
}

// get returns key's value and marks it used.
func (c *lru[V]) get(key string) (V, bool) {
	e, ok := c.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry[V]).val, true
}

// add stores a key that is not present, forgetting the least recently used
// entry when full.
func (c *lru[V]) add(key string, v V) {
	if c.order.Len() >= c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruEntry[V]).key)
	}
	c.items[key] = c.order.PushFront(&lruEntry[V]{key: key, val: v})
}

// remove forgets key, if present.
func (c *lru[V]) remove(key string) {
	if e, ok := c.items[key]; ok {
		c.order.Remove(e)
		delete(c.items, key)
	}
}

// len is how many entries c holds.
func (c *lru[V]) len() int { return c.order.Len() }

// removeOldest forgets the least recently used entry, if any.
func (c *lru[V]) removeOldest() {
	if e := c.order.Back(); e != nil {
		c.order.Remove(e)
		delete(c.items, e.Value.(*lruEntry[V]).key)
	}
}

// lockTable is a shard's locks: one least-recently-used order per rule
// name, under one bound for them all. When full, a new lock pushes out
// the least recently used lock of the name that holds the most, so that
// a flood of one rule's locks (cheap ones, such as failed API key checks
// from many networks) pushes out only its own and never another rule's
// (an account's, restored from the lockout log when Redis was lost),
// while no rule is ever refused a place: a rule holding fewer than its
// share finds one taken from the largest.
type lockTable struct {
	max    int
	n      int
	byName map[string]*lru[*localLock]
}

func newLockTable(max int) lockTable {
	return lockTable{max: max, byName: make(map[string]*lru[*localLock])}
}

// get returns the lock of identity key under rule name and marks it used.
func (t *lockTable) get(name, key string) (*localLock, bool) {
	c := t.byName[name]
	if c == nil {
		return nil, false
	}
	return c.get(key)
}

// add stores a lock that is not present.
func (t *lockTable) add(name, key string, lk *localLock) {
	if t.n >= t.max {
		var largest *lru[*localLock]
		for _, c := range t.byName {
			if largest == nil || c.len() > largest.len() {
				largest = c
			}
		}
		largest.removeOldest()
		t.n--
	}
	c := t.byName[name]
	if c == nil {
		// Its own bound is the table's, which add keeps.
		l := newLRU[*localLock](t.max + 1)
		c = &l
		t.byName[name] = c
	}
	c.add(key, lk)
	t.n++
}

// len is how many locks t holds.
func (t *lockTable) len() int { return t.n }
