package authtest

import (
	"context"
	"slices"
	"sync"

	"github.com/xcloak/xcloak/auth"
)

// EventStore is an in-memory auth.EventStore. The zero value is ready.
type EventStore struct {
	mu      sync.Mutex
	events  []auth.Event
	batches map[auth.EventBatchID]bool // written, as Postgres's event_batches
}

var _ auth.EventStore = (*EventStore)(nil)

// InsertEvents keeps the batch, unless it kept one under id already.
func (s *EventStore) InsertEvents(_ context.Context, id auth.EventBatchID, batch []auth.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.batches[id] {
		return nil
	}
	if s.batches == nil {
		s.batches = map[auth.EventBatchID]bool{}
	}
	s.batches[id] = true
	s.events = append(s.events, batch...)
	return nil
}

// Events returns the events kept so far, oldest first.
func (s *EventStore) Events() []auth.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// EventCounter is an in-memory auth.EventCounter that counts events by
// kind. The zero value is ready.
type EventCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

var _ auth.EventCounter = (*EventCounter)(nil)

// CountEvents counts the batch.
func (c *EventCounter) CountEvents(_ context.Context, batch []auth.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	for _, e := range batch {
		c.counts[e.Kind]++
	}
	return nil
}

// Count returns how many events of kind were counted.
func (c *EventCounter) Count(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[kind]
}
