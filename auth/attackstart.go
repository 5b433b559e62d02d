package auth

import (
	"context"
	"sync"
	"time"
)

// AttackStarted is what this replica does as it records attack mode's
// start (package attack's Watch.OnStart): SignOutNewDevices at once, from
// since, and again SignOutAgainAfter later with the accounts the first
// pass returned.
//
// The second pass is the service's background work: Run (or Drain), as it
// ends, waits for one still to come, at most SignOutAgainAfter, and then
// writes its events, so that it runs before the stores behind the service
// close. A pass left to fire after them would fail on a closed pool, and
// the sessions the sign-ins in flight wrote after the first pass, on the
// replicas that did not know of attack mode yet, would outlive its start.
// Once the service has stopped there is no second pass.
func (s *Service) AttackStarted(ctx context.Context, since time.Time) {
	first, err := s.SignOutNewDevices(ctx, since, nil)
	if err != nil {
		s.log.Error("attack mode: signing out new browsers", "err", err)
	}
	s.secondPasses.after(SignOutAgainAfter, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := s.SignOutNewDevices(ctx, since, first); err != nil {
			s.log.Error("attack mode: signing out new browsers again", "err", err)
		}
	})
}

// delayedWork runs functions a while after they are handed to it, until
// it is stopped; stop waits for those handed to it before.
type delayedWork struct {
	mu      sync.Mutex
	stopped bool
	pending sync.WaitGroup
}

// after runs f in its own goroutine once d has passed, unless w was
// stopped already.
func (w *delayedWork) after(d time.Duration, f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.pending.Add(1)
	time.AfterFunc(d, func() {
		defer w.pending.Done()
		f()
	})
}

// stop takes no more work, and waits for the work handed to w to have
// run.
func (w *delayedWork) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.pending.Wait()
}
