package live_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/web/live"
)

// reads is a Load whose every read waits for the test to hand it a
// result, so the test decides what each read returns and when: no
// assertion depends on timing.
type reads struct {
	next  chan result
	count atomic.Int64 // reads answered
	asked chan dashboard.Period
}

type result struct {
	frame live.Frame
	err   error
}

func newReads() *reads {
	return &reads{next: make(chan result), asked: make(chan dashboard.Period, 16)}
}

func (r *reads) load(ctx context.Context, p dashboard.Period) (live.Frame, error) {
	select {
	case r.asked <- p:
	default:
	}
	select {
	case res := <-r.next:
		r.count.Add(1)
		return res.frame, res.err
	case <-ctx.Done():
		return live.Frame{}, ctx.Err()
	}
}

// answer makes the next read return f, err.
func (r *reads) answer(f live.Frame, err error) { r.next <- result{f, err} }

// take waits for sub's news and returns the newest frame.
func take(h *live.Hub, sub *live.Sub) live.Frame {
	<-sub.Ready()
	return h.Latest(sub)
}

func TestHubSharesOneReaderPerPeriod(t *testing.T) {
	r := newReads()
	h := live.NewHub(r.load, time.Millisecond, nil)
	a := h.Subscribe(dashboard.Period5m)
	defer h.Unsubscribe(a)
	r.answer(live.Frame{Live: "one"}, nil)
	if got := take(h, a); got.Live != "one" || got.Failed {
		t.Fatalf("first frame %+v, want live one", got)
	}

	// A second stream of the period gets the frame already read, at once,
	// without another read.
	b := h.Subscribe(dashboard.Period5m)
	defer h.Unsubscribe(b)
	if got := take(h, b); got.Live != "one" {
		t.Fatalf("second stream's first frame %+v, want the one read", got)
	}
	if n := r.count.Load(); n != 1 {
		t.Fatalf("%d reads for two streams of one period, want 1", n)
	}

	// One read serves both.
	r.answer(live.Frame{Live: "two"}, nil)
	for name, sub := range map[string]*live.Sub{"a": a, "b": b} {
		if got := take(h, sub); got.Live != "two" {
			t.Errorf("stream %s: %+v, want live two", name, got)
		}
	}
}

func TestHubSendsOnlyChanges(t *testing.T) {
	r := newReads()
	h := live.NewHub(r.load, time.Millisecond, nil)
	sub := h.Subscribe(dashboard.Period1h)
	defer h.Unsubscribe(sub)
	r.answer(live.Frame{Live: "same"}, nil)
	take(h, sub)
	r.answer(live.Frame{Live: "same"}, nil)
	// The third read cannot start before the second is handled: once it
	// asks, the unchanged frame has been passed over.
	<-r.asked
	<-r.asked
	<-r.asked
	select {
	case <-sub.Ready():
		t.Fatalf("news for an unchanged frame: %+v", h.Latest(sub))
	default:
	}
	r.answer(live.Frame{Live: "changed"}, nil)
	if got := take(h, sub); got.Live != "changed" {
		t.Fatalf("%+v, want changed", got)
	}
}

func TestHubKeepsTheLastFrameWhenAReadFails(t *testing.T) {
	r := newReads()
	h := live.NewHub(r.load, time.Millisecond, nil)
	sub := h.Subscribe(dashboard.Period24h)
	defer h.Unsubscribe(sub)
	r.answer(live.Frame{Live: "figures", Events: "rows"}, nil)
	take(h, sub)
	r.answer(live.Frame{}, errors.New("redis is down"))
	if got := take(h, sub); got != (live.Frame{Live: "figures", Events: "rows", Failed: true}) {
		t.Fatalf("after a failed read %+v, want the last frame marked failed", got)
	}
	r.answer(live.Frame{Live: "figures", Events: "rows"}, nil)
	if got := take(h, sub); got.Failed {
		t.Fatalf("after a good read %+v, want it no longer failed", got)
	}
}

func TestHubStopsReadingWithTheLastStream(t *testing.T) {
	r := newReads()
	h := live.NewHub(r.load, time.Millisecond, nil)
	a := h.Subscribe(dashboard.Period5m)
	b := h.Subscribe(dashboard.Period5m)
	r.answer(live.Frame{Live: "x"}, nil)
	take(h, a)
	h.Unsubscribe(a)
	h.Unsubscribe(b)
	// A new stream starts a new reader that reads again. The old reader
	// may still take one answer before it sees its context end, and drops
	// it; so answer until the new stream has news.
	c := h.Subscribe(dashboard.Period5m)
	defer h.Unsubscribe(c)
	for {
		select {
		case r.next <- result{frame: live.Frame{Live: "fresh"}}:
			continue
		case <-c.Ready():
		}
		break
	}
	if got := h.Latest(c); got.Live != "fresh" {
		t.Fatalf("new stream %+v, want a fresh read", got)
	}
	if got := h.Latest(a); got.Live != "x" {
		t.Fatalf("a stream that left got %+v after it left", got)
	}
}
