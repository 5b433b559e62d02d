package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progress shows an http run as it goes: a bar redrawn in place on a
// terminal, a plain line every second otherwise.
type progress struct {
	w        io.Writer
	terminal bool
	duration time.Duration
	max      int
}

func newProgress(w io.Writer, c attackConfig) *progress {
	return &progress{w: w, terminal: isTerminal(w), duration: c.duration, max: c.maxRequests}
}

// run draws until done is closed, then draws the last state, and returns
// once it has.
func (p *progress) run(done <-chan struct{}, start time.Time, t *tally, l *legit) {
	every := time.Second
	if p.terminal {
		every = 200 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-done:
			p.draw(start, t, l, true)
			return
		case <-tick.C:
			p.draw(start, t, l, false)
		}
	}
}

func (p *progress) draw(start time.Time, t *tally, l *legit, last bool) {
	elapsed := time.Since(start)
	sent := t.sent.Load()
	done := float64(elapsed) / float64(p.duration)
	if p.max > 0 {
		done = max(done, float64(sent)/float64(p.max))
	}
	done = min(done, 1)
	if last {
		done = 1
	}
	ok, tries := l.snapshot()
	status := fmt.Sprintf("%5.1fs sent %d (%.0f/s) 401 %d 429 %d 5xx %d err %d legit %d/%d",
		elapsed.Seconds(), sent, float64(sent)/max(elapsed.Seconds(), 1e-3), t.unauthorized.Load(), t.limited.Load(),
		t.serverError.Load()+t.unavailable.Load(), t.transport.Load(), ok, tries)
	if !p.terminal {
		if !last {
			fmt.Fprintln(p.w, status)
		}
		return
	}
	const width = 24
	filled := int(done * width)
	// \x1b[K clears what a longer previous line left.
	line := fmt.Sprintf("\r[%s%s] %3.0f%% %s\x1b[K", strings.Repeat("#", filled), strings.Repeat("-", width-filled), 100*done, status)
	if last {
		line += "\n"
	}
	fmt.Fprint(p.w, line)
}
