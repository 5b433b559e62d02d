package ratelimit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Limit is how many requests a rule admits per sliding window.
type Limit struct {
	// Count is the number of requests admitted in any period of Window.
	Count int
	// Window is the length of the sliding window. The limiter works in
	// microseconds of Redis time; windows are at least one millisecond.
	Window time.Duration
}

// Bounds on a Limit. The count bound keeps one full log within 1.2 MB per
// identity (6 bytes an entry at most, and a long log keeps entries that
// left the window until they are half of it); the window bound keeps every key's
// lifetime bounded, and a log's entries within 6 bytes.
const (
	MinWindow = time.Millisecond
	MaxWindow = 31 * 24 * time.Hour
	MaxCount  = 100_000
)

// PerMinute returns a Limit of n requests per minute.
func PerMinute(n int) Limit { return Limit{Count: n, Window: time.Minute} }

// PerHour returns a Limit of n requests per hour.
func PerHour(n int) Limit { return Limit{Count: n, Window: time.Hour} }

// Validate reports whether l can be enforced.
func (l Limit) Validate() error {
	if err := l.check(); err != nil {
		return fmt.Errorf("ratelimit: limit %s: %w", l, err)
	}
	return nil
}

func (l Limit) check() error {
	switch {
	case l.Count < 1 || l.Count > MaxCount:
		return fmt.Errorf("count %d out of range 1..%d", l.Count, MaxCount)
	case l.Window < MinWindow || l.Window > MaxWindow:
		return fmt.Errorf("window %s out of range %s..%s", l.Window, MinWindow, MaxWindow)
	}
	return nil
}

// String formats l as ParseLimit reads it, e.g. "50/10m0s".
func (l Limit) String() string {
	return strconv.Itoa(l.Count) + "/" + l.Window.String()
}

// ParseLimit reads a limit written as COUNT/WINDOW, where WINDOW is a Go
// duration such as "10m", "1h" or "90s": "50/10m" admits 50 requests in any
// ten minutes.
func ParseLimit(s string) (Limit, error) {
	count, window, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Limit{}, fmt.Errorf("ratelimit: limit %q: want COUNT/WINDOW, e.g. 50/10m", s)
	}
	n, err := strconv.Atoi(strings.TrimSpace(count))
	if err != nil {
		return Limit{}, fmt.Errorf("ratelimit: limit %q: count: %w", s, errors.Unwrap(err))
	}
	d, err := time.ParseDuration(strings.TrimSpace(window))
	if err != nil {
		return Limit{}, fmt.Errorf("ratelimit: limit %q: window: %w", s, err)
	}
	l := Limit{Count: n, Window: d}
	if err := l.check(); err != nil {
		return Limit{}, fmt.Errorf("ratelimit: limit %q: %w", s, err)
	}
	return l, nil
}
