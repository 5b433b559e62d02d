package auth

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/internal/race"
)

// verifying checks "pw" against hash with verify in a goroutine, failing
// the test unless it matches, and returns a channel closed when it is done.
func verifying(t *testing.T, what string, verify func(context.Context, string, string) (bool, bool, error), hash string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if ok, _, err := verify(context.Background(), hash, "pw"); !ok || err != nil {
			t.Errorf("%s: %v, %v", what, ok, err)
		}
	}()
	return done
}

// giveWay calls h.GiveWay in a goroutine and returns a channel closed when
// it returns.
func giveWay(ctx context.Context, h *Hasher, limit time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.GiveWay(ctx, limit)
	}()
	return done
}

// waitGivingWay waits until n callers give way, failing if done closes
// first: the caller returned while it should have waited.
func waitGivingWay(t *testing.T, h *Hasher, n int, done <-chan struct{}) {
	t.Helper()
	waitFor(t, "a caller giving way", func() bool {
		select {
		case <-done:
			t.Fatal("returned at once with a hash in flight")
		default:
		}
		return h.Stats().GivingWay == n
	})
}

// TestGiveWayWaitsForHashesInFlight: GiveWay returns only once every hash
// running when it was called, and those started meanwhile, are done.
func TestGiveWayWaitsForHashesInFlight(t *testing.T) {
	h := newHasher(t, fast, 4, time.Second)
	release := holdSlots(t, h, 2)
	done := giveWay(context.Background(), h, time.Hour)
	waitGivingWay(t, h, 1, done)
	release()
	<-done
	if got := h.Stats(); got != (HasherStats{}) {
		t.Fatalf("after the hashes: %+v, want nothing running or waiting", got)
	}
}

// TestGiveWayWithoutHashes returns at once, however long it may wait,
// and allocates nothing: it is on the path of every rejected sign-in.
func TestGiveWayWithoutHashes(t *testing.T) {
	h := newHasher(t, fast, 4, time.Second)
	if _, err := h.Hash(context.Background(), "done before"); err != nil {
		t.Fatal(err)
	}
	<-giveWay(context.Background(), h, time.Hour)
	if race.Enabled {
		return
	}
	if n := testing.AllocsPerRun(1000, func() { h.GiveWay(context.Background(), time.Hour) }); n > 0 {
		t.Errorf("%v allocations with no hash in flight, want 0", n)
	}
}

// TestGiveWayBounded: with a hash that never ends, GiveWay returns after
// its limit, or when its context ends.
func TestGiveWayBounded(t *testing.T) {
	h := newHasher(t, fast, 4, time.Second)
	holdSlots(t, h, 1)
	<-giveWay(context.Background(), h, time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	done := giveWay(ctx, h, time.Hour)
	waitGivingWay(t, h, 1, done)
	cancel()
	<-done

	<-giveWay(ctx, h, time.Hour) // a context already ended
	if got := h.Stats().GivingWay; got != 0 {
		t.Fatalf("%d still giving way", got)
	}
}

// TestHashesGiveWayToTrusted: with a returning browser's hash in flight
// (VerifyTrusted), another hash waits before it takes a slot and runs
// once that one is done; another returning browser's does not wait.
func TestHashesGiveWayToTrusted(t *testing.T) {
	h := newHasher(t, fast, 4, time.Second)
	valid, err := h.Hash(context.Background(), "pw")
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	var entered atomic.Int64
	h.inSlot = func() {
		if entered.Add(1) == 1 {
			<-gate
		}
	}
	held := verifying(t, "held trusted", h.VerifyTrusted, valid)
	waitFor(t, "a trusted hash in flight", func() bool { return h.Stats().Running == 1 })
	<-verifying(t, "second trusted", h.VerifyTrusted, valid)

	done := verifying(t, "untrusted", h.Verify, valid)
	waitFor(t, "a hash giving way", func() bool {
		select {
		case <-done:
			t.Fatal("a hash ran beside a trusted one in flight")
		default:
		}
		return h.trusted.waiting.Load() == 1
	})
	if got := h.Stats().Running; got != 1 {
		t.Fatalf("%d hashes running, want the trusted one alone", got)
	}
	close(gate)
	<-held
	<-done
}

// TestHashesGiveWayBounded: a returning browser's hash that never ends
// delays the others by hashGiveWay at most, never fails them.
func TestHashesGiveWayBounded(t *testing.T) {
	h := newHasher(t, fast, 4, time.Second)
	valid, err := h.Hash(context.Background(), "pw")
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	defer close(gate)
	var entered atomic.Int64
	h.inSlot = func() {
		if entered.Add(1) == 1 {
			<-gate
		}
	}
	go h.VerifyTrusted(context.Background(), valid, "pw")
	waitFor(t, "a trusted hash in flight", func() bool { return h.Stats().Running == 1 })
	if ok, _, err := h.Verify(context.Background(), valid, "pw"); !ok || err != nil {
		t.Fatalf("Verify beside a trusted hash that never ends: %v, %v", ok, err)
	}
}

// TestQueuedHashGivesWayToReturning: a hash that queued for a slot before
// a returning browser's sign-in began does not start beside it when the
// slot frees (a flood's admitted attempts all queue at the attack's
// start), and still runs once the sign-in ends, or after hashGiveWay at
// most if it never does.
func TestQueuedHashGivesWayToReturning(t *testing.T) {
	for _, ends := range []bool{true, false} {
		h := newHasher(t, fast, 1, time.Second)
		valid, err := h.Hash(context.Background(), "pw")
		if err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		var entered atomic.Int64
		h.inSlot = func() {
			if entered.Add(1) == 1 {
				<-gate
			}
		}
		first := verifying(t, "first", h.Verify, valid)
		waitFor(t, "a hash holding the one slot", func() bool { return entered.Load() == 1 })
		queued := verifying(t, "queued", h.Verify, valid)
		waitFor(t, "a hash queued for the slot", func() bool { return h.Stats().Waiting == 1 })
		h.returningStarted()
		close(gate)
		<-first
		if ends {
			waitFor(t, "the queued hash giving way", func() bool {
				select {
				case <-queued:
					t.Fatal("the queued hash ran beside a returning sign-in in flight")
				default:
				}
				return h.trusted.waiting.Load() == 1
			})
			if got := entered.Load(); got != 1 {
				t.Fatalf("%d hashes entered a slot, want the first alone", got)
			}
			h.returningEnded()
		}
		<-queued
		if !ends {
			h.returningEnded()
		}
		if got := entered.Load(); got != 2 {
			t.Errorf("returning sign-in ends %v: %d hashes ran, want 2", ends, got)
		}
	}
}

// TestQueuedHashKeepsItsTurn: a hash that gives way once it has its slot
// keeps the slot meanwhile, so the hash queued behind it stays queued
// rather than taking it, and neither queues anew (which could fail it
// with ErrHasherBusy after it had won a slot).
func TestQueuedHashKeepsItsTurn(t *testing.T) {
	h := newHasher(t, fast, 1, time.Second)
	valid, err := h.Hash(context.Background(), "pw")
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	var entered atomic.Int64
	h.inSlot = func() {
		if entered.Add(1) == 1 {
			<-gate
		}
	}
	first := verifying(t, "first", h.Verify, valid)
	waitFor(t, "a hash holding the one slot", func() bool { return h.Stats().Running == 1 })
	second := verifying(t, "second", h.Verify, valid)
	third := verifying(t, "third", h.Verify, valid)
	waitFor(t, "two hashes queued for the slot", func() bool { return h.Stats().Waiting == 2 })
	h.returningStarted()
	close(gate)
	<-first
	kept := func() bool { s := h.Stats(); return s.HashesGivingWay == 1 && s.Waiting == 1 && s.Running == 0 }
	waitFor(t, "one hash giving way with the slot, one queued", kept)
	// Given back, the slot would go to the queued hash at once, which
	// would give way in turn: two giving way, none queued.
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); {
		if !kept() {
			t.Fatalf("hashes %+v, want one giving way with the slot and one still queued", h.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	h.returningEnded()
	<-second
	<-third
	if got := entered.Load(); got != 3 {
		t.Errorf("%d hashes ran, want 3", got)
	}
}
