package web

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// TestReadinessSharesOneCheck: the requests for /readyz that arrive while
// a check of the stores runs share it, a flood of them costing the stores
// one check; one whose prober hangs up cuts it short for none of the
// others; a request after it checks again.
func TestReadinessSharesOneCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		release := make(chan struct{})
		r := &readiness{log: slog.New(slog.DiscardHandler), check: func(ctx context.Context) map[string]error {
			calls.Add(1)
			select {
			case <-release:
				return map[string]error{"postgres": nil}
			case <-ctx.Done():
				return map[string]error{"postgres": ctx.Err()}
			}
		}}
		hungUp, hangUp := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := r.get(hungUp); !errors.Is(err, context.Canceled) {
				t.Errorf("a prober that hung up: %v, want context.Canceled", err)
			}
		})
		for range 50 {
			wg.Go(func() {
				if got, err := r.get(t.Context()); err != nil || len(got) != 1 || got["postgres"] != nil {
					t.Errorf("readiness: %v, %v; want postgres ok", got, err)
				}
			})
		}
		synctest.Wait()
		hangUp()
		synctest.Wait()
		if n := calls.Load(); n != 1 {
			t.Fatalf("51 requests while a check runs made %d checks, want 1", n)
		}
		close(release)
		wg.Wait()
		if _, err := r.get(t.Context()); err != nil || calls.Load() != 2 {
			t.Fatalf("a request after the check: %v, %d checks; want a second", err, calls.Load())
		}
	})
}

// TestReadinessLogsChanges: a store's failure is logged once when it
// begins and once when it ends, not at every check of a flood of probes.
func TestReadinessLogsChanges(t *testing.T) {
	var buf bytes.Buffer
	var err error
	r := &readiness{log: slog.New(slog.NewJSONHandler(&buf, nil)), check: func(context.Context) map[string]error {
		return map[string]error{"postgres": err, "redis": nil}
	}}
	for _, e := range []error{nil, errors.New("connection refused"), errors.New("connection refused"), errors.New("connection refused"), nil, nil} {
		err = e
		if _, err := r.get(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	got := buf.String()
	if strings.Count(got, "readiness check failed") != 1 || strings.Count(got, "readiness check passes again") != 1 || strings.Contains(got, `"store":"redis"`) {
		t.Errorf("three failed checks of postgres between passing ones logged:\n%s\nwant one failure and one recovery, of postgres alone", got)
	}
}
