package auth

import "context"

// EventHook hears every security-event row once it is written, to tell
// other systems (package webhook). It is what the audit stream is to the
// log: the same rows, after the same write.
type EventHook interface {
	// EventsWritten is called with each batch of rows once the batch is
	// written. It must not block, nor keep rows past the call.
	EventsWritten(rows []Event)
	// Run does the hook's background work until ctx is done, then
	// finishes within its own bounds and returns. Service.Run runs it and
	// ends it last, once the service's own work has written its last
	// events; Service.Drain runs it with ctx already done, to deliver
	// what a command's rows handed it.
	Run(ctx context.Context)
}

// HookedEvents returns an EventStore that writes to store and then hands
// each batch written to hook: only rows written reach it, and a batch
// written again after a failure reaches it once, when a write of it
// succeeds (the store answers success for a batch it finds written
// before, whose first write's answer was lost). NewService wraps its
// Deps.Events so when Deps.Hook is set; the other writers of security
// events (the attack watch) wrap theirs. A nil hook returns store itself.
func HookedEvents(store EventStore, hook EventHook) EventStore {
	if hook == nil {
		return store
	}
	return hookedStore{EventStore: store, hook: hook}
}

type hookedStore struct {
	EventStore
	hook EventHook
}

func (s hookedStore) InsertEvents(ctx context.Context, id EventBatchID, batch []Event) error {
	if err := s.EventStore.InsertEvents(ctx, id, batch); err != nil {
		return err
	}
	s.hook.EventsWritten(batch)
	return nil
}
