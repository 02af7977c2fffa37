package observability

import "container/list"

// lru is a size-capped map that evicts the least recently used entry. It is
// what keeps every per-object cache in this package bounded. It is not safe
// for concurrent use; owners guard it with their own mutex.
type lru[K comparable, V any] struct {
	max   int
	order *list.List // front = most recently used; elements hold *lruEntry
	items map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key K
	val V
}

func newLRU[K comparable, V any](maxEntries int) *lru[K, V] {
	if maxEntries < 1 {
		maxEntries = 1
	}
	return &lru[K, V]{max: maxEntries, order: list.New(), items: map[K]*list.Element{}}
}

func (c *lru[K, V]) get(k K) (V, bool) {
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// add stores v under k and reports whether an older entry was evicted to make room.
func (c *lru[K, V]) add(k K, v V) (evicted bool) {
	if e, ok := c.items[k]; ok {
		e.Value.(*lruEntry[K, V]).val = v
		c.order.MoveToFront(e)
		return false
	}
	c.items[k] = c.order.PushFront(&lruEntry[K, V]{key: k, val: v})
	if c.order.Len() > c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruEntry[K, V]).key)
		return true
	}
	return false
}

func (c *lru[K, V]) remove(k K) (V, bool) {
	if e, ok := c.items[k]; ok {
		c.order.Remove(e)
		delete(c.items, k)
		return e.Value.(*lruEntry[K, V]).val, true
	}
	var zero V
	return zero, false
}

func (c *lru[K, V]) len() int { return c.order.Len() }
