package auth_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/app"
)

// stuckMailer holds every Send until it is let go, then fails it: a mail
// server that stops answering just as the service shuts down.
type stuckMailer struct {
	entered chan struct{} // receives once per Send begun
	release chan struct{} // closed by let to end the Sends
	once    sync.Once
}

func (m *stuckMailer) let() { m.once.Do(func() { close(m.release) }) }

func (m *stuckMailer) Send(ctx context.Context, _ auth.Message) error {
	m.entered <- struct{}{}
	<-m.release
	return errors.New("mail server did not answer")
}

// TestRunWritesEventsOfItsDrain: the events recorded while Run finishes its
// work after ctx ends (here a mail of the reset queue that fails during the
// drain) are written before Run returns, not left in a queue nobody reads.
func TestRunWritesEventsOfItsDrain(t *testing.T) {
	mailer := &stuckMailer{entered: make(chan struct{}, 16), release: make(chan struct{})}
	f := buildFixture(t, nil, func(d *app.Deps) { d.Mailer = mailer })
	svc, pool := f.svc, f.db
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); mailer.let(); <-done })
	if _, err := svc.CreateUser(t.Context(), "ann@example.com", "a long password", false, "cli"); err != nil {
		t.Fatal(err)
	}
	if err := svc.RequestReset(t.Context(), "ann@example.com", client("198.51.100.20")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-mailer.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the reset mail was never sent")
	}
	cancel()
	// Long enough for a recorder that stops with ctx to have written
	// its last batch.
	time.Sleep(500 * time.Millisecond)
	mailer.let()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM security_events WHERE kind = $1", auth.EventResetMailDropped).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d %s events stored after Run returned, want 1", n, auth.EventResetMailDropped)
	}
}

// TestDrainSaysWhatItLost: a Drain that cannot write the events queued
// (Postgres gone) says how many were lost, and counts them as dropped.
func TestDrainSaysWhatItLost(t *testing.T) {
	f := buildFixture(t, nil)
	f.addUser(t, "ann@example.com", "a long password", false)
	f.db.Close()
	err := f.svc.Drain(t.Context())
	if err == nil || !strings.Contains(err.Error(), "1 events not stored") {
		t.Errorf("Drain without Postgres: %v, want it to say 1 event was not stored", err)
	}
}
