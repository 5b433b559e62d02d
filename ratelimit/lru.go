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
