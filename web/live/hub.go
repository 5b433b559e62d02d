package live

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/xcloak/xcloak/dashboard"
)

// readTimeout bounds one read of a period's figures.
const readTimeout = 5 * time.Second

// Frame is the rendered live regions of one period.
type Frame struct {
	Live, Lockouts, Events string
	// Failed: the last read failed, and the regions are the ones read
	// before it.
	Failed bool
}

// Load reads and renders the live regions of period p.
type Load func(ctx context.Context, p dashboard.Period) (Frame, error)

// Hub reads each watched period's dashboard once per interval, however
// many streams watch it, and hands the result to them. A period nobody
// watches costs nothing: its reader stops with its last stream.
type Hub struct {
	load     Load
	interval time.Duration
	log      *slog.Logger

	mu    sync.Mutex
	feeds map[dashboard.Period]*feed
}

// feed is one watched period.
type feed struct {
	subs  map[*Sub]struct{}
	frame Frame
	ready bool // frame holds a read
	stop  context.CancelFunc
}

// Sub is one stream's place in a feed.
type Sub struct {
	period dashboard.Period
	// ready holds a token when frame has news; the stream takes the
	// newest frame, so a slow client skips frames rather than queueing
	// them.
	ready chan struct{}
	frame Frame
}

// Ready receives when the subscription has a frame it has not taken yet;
// take it with Hub.Latest.
func (s *Sub) Ready() <-chan struct{} { return s.ready }

// NewHub returns a Hub that reads with load every interval; log notes a
// reader that starts failing (nil: nowhere).
func NewHub(load Load, interval time.Duration, log *slog.Logger) *Hub {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Hub{load: load, interval: interval, log: log, feeds: map[dashboard.Period]*feed{}}
}

// Subscribe adds a stream to p's feed, starting the feed's reader if it is
// the first. A feed that has read already hands its frame over at once.
func (h *Hub) Subscribe(p dashboard.Period) *Sub {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.feeds[p]
	if f == nil {
		ctx, cancel := context.WithCancel(context.Background())
		f = &feed{subs: map[*Sub]struct{}{}, stop: cancel}
		h.feeds[p] = f
		go h.run(ctx, p, f)
	}
	sub := &Sub{period: p, ready: make(chan struct{}, 1)}
	f.subs[sub] = struct{}{}
	if f.ready {
		sub.frame = f.frame
		sub.ready <- struct{}{}
	}
	return sub
}

// Unsubscribe removes a stream; the last one out stops the reader.
func (h *Hub) Unsubscribe(sub *Sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.feeds[sub.period]
	if f == nil {
		return
	}
	delete(f.subs, sub)
	if len(f.subs) == 0 {
		f.stop()
		delete(h.feeds, sub.period)
	}
}

// Latest is the newest frame for sub.
func (h *Hub) Latest(sub *Sub) Frame {
	h.mu.Lock()
	defer h.mu.Unlock()
	return sub.frame
}

// run reads p's figures every interval until ctx ends, and passes each
// frame that differs from the last to every stream of the feed.
func (h *Hub) run(ctx context.Context, p dashboard.Period, f *feed) {
	tick := time.NewTicker(h.interval)
	defer tick.Stop()
	failing := false
	for {
		readCtx, cancel := context.WithTimeout(ctx, readTimeout)
		frame, err := h.load(readCtx, p)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil && !failing {
			h.log.Error("reading the dashboard for live updates", "period", p.String(), "err", err)
		}
		failing = err != nil
		h.mu.Lock()
		if err != nil {
			frame = f.frame
			frame.Failed = true
		}
		if !f.ready || frame != f.frame {
			f.frame, f.ready = frame, true
			for sub := range f.subs {
				sub.frame = frame
				select {
				case sub.ready <- struct{}{}:
				default:
				}
			}
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
