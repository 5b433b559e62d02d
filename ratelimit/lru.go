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

// remove forgets key and reports whether it was present.
func (c *lru[V]) remove(key string) bool {
	e, ok := c.items[key]
	if ok {
		c.order.Remove(e)
		delete(c.items, key)
	}
	return ok
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

// groupedLRU is entries in groups (a rule's name, or its name and a class
// of its identities: LockoutPolicy.Group), one least-recently-used order
// per group, under one bound for them all. When full, a new entry pushes
// out the least recently used entry of the group that holds the most, so
// that a flood of one group's entries (one rule's identities from many
// networks, an application's accounts named at will) pushes out its own
// rather than another group's, while no group is ever refused a place: a
// group holding fewer finds one taken from the largest.
type groupedLRU[V any] struct {
	max     int
	n       int
	byGroup map[string]*lru[V]
}

func newGroupedLRU[V any](max int) groupedLRU[V] {
	return groupedLRU[V]{max: max, byGroup: make(map[string]*lru[V])}
}

// get returns key's value in group g and marks it used.
func (c *groupedLRU[V]) get(g, key string) (V, bool) {
	l := c.byGroup[g]
	if l == nil {
		var zero V
		return zero, false
	}
	return l.get(key)
}

// add stores a key that is not present in group g.
func (c *groupedLRU[V]) add(g, key string, v V) {
	if c.n >= c.max {
		var largest *lru[V]
		for _, l := range c.byGroup {
			if largest == nil || l.len() > largest.len() {
				largest = l
			}
		}
		largest.removeOldest()
		c.n--
	}
	l := c.byGroup[g]
	if l == nil {
		// Its own bound is the whole's, which add keeps.
		nl := newLRU[V](c.max + 1)
		l = &nl
		c.byGroup[g] = l
	}
	l.add(key, v)
	c.n++
}

// remove forgets key in group g, if present, and the group once empty,
// so that no eviction's search for the largest walks empty ones.
func (c *groupedLRU[V]) remove(g, key string) {
	if l := c.byGroup[g]; l != nil && l.remove(key) {
		c.n--
		if l.len() == 0 {
			delete(c.byGroup, g)
		}
	}
}

// len is how many entries c holds.
func (c *groupedLRU[V]) len() int { return c.n }

// each calls f with every value c holds, and its group.
func (c *groupedLRU[V]) each(f func(g string, v V)) {
	for g, l := range c.byGroup {
		for e := l.order.Front(); e != nil; e = e.Next() {
			f(g, e.Value.(*lruEntry[V]).val)
		}
	}
}
