package auth

import (
	"context"
	"sync"
)

// detach runs write past the answer of the request whose context is ctx,
// after every write detached before it under the same key, within the
// time afterDecision gives it from when it starts: for a write whose wait
// would tell the client what the answer must not (recordHeldLockout), and
// for those that must follow it (clearSecondStepLock). Writes under other
// keys run at once. Run, Drain and Flush wait for them all; a write
// under the key made on a request's path waits for them first (settle).
func (s *Service) detach(ctx context.Context, key string, write func(context.Context)) {
	base := context.WithoutCancel(ctx)
	s.detached.then(key, func() {
		ctx, cancel := s.afterDecision(base)
		defer cancel()
		write(ctx)
	})
}

// keyedWrites runs the writes of each key one after another, each in a
// goroutine of its own that waits for the key's write before it.
type keyedWrites struct {
	mu sync.Mutex
	// tails holds, for each key with a write under way, a channel closed
	// once the last write begun under it, and so every one before it,
	// has ended.
	tails map[string]chan struct{}
}

func (w *keyedWrites) then(key string, write func()) {
	w.mu.Lock()
	if w.tails == nil {
		w.tails = make(map[string]chan struct{})
	}
	prev, done := w.tails[key], make(chan struct{})
	w.tails[key] = done
	w.mu.Unlock()
	go func() {
		defer func() {
			w.mu.Lock()
			if w.tails[key] == done {
				delete(w.tails, key)
			}
			w.mu.Unlock()
			close(done)
		}()
		if prev != nil {
			<-prev
		}
		write()
	}()
}

// settle waits for every write begun so far under keys.
func (w *keyedWrites) settle(keys ...string) {
	w.mu.Lock()
	tails := make([]chan struct{}, 0, len(keys))
	for _, k := range keys {
		if t := w.tails[k]; t != nil {
			tails = append(tails, t)
		}
	}
	w.mu.Unlock()
	for _, t := range tails {
		<-t
	}
}

// settleAll waits for every write begun so far.
func (w *keyedWrites) settleAll() {
	w.mu.Lock()
	tails := make([]chan struct{}, 0, len(w.tails))
	for _, t := range w.tails {
		tails = append(tails, t)
	}
	w.mu.Unlock()
	for _, t := range tails {
		<-t
	}
}
