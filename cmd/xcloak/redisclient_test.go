package main

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
)

// dialCounter counts the connections a client tries to open.
type dialCounter struct{ n atomic.Int64 }

func (d *dialCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.n.Add(1)
		return next(ctx, network, addr)
	}
}
func (d *dialCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (d *dialCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRedisClientDoesNotRetry: with Redis down, one command of the
// server's client tries one connection, not four (go-redis retries three
// times unless told otherwise), so that a decision's time goes to the
// failure policy rather than to retries.
func TestRedisClientDoesNotRetry(t *testing.T) {
	srv := testenv.PrivateRedis(t)
	srv.Stop()
	for _, tc := range []struct {
		url   string
		dials int64
	}{
		{srv.URL(), 1},
		{srv.URL() + "?max_retries=2", 3}, // the URL's own setting wins
	} {
		rdb, _, err := newRedisClient(tc.url, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		var dials dialCounter
		rdb.AddHook(&dials)
		err = rdb.Ping(t.Context()).Err()
		rdb.Close()
		if err == nil {
			t.Fatalf("%s: ping answered with Redis stopped", tc.url)
		}
		if got := dials.n.Load(); got != tc.dials {
			t.Errorf("%s: one ping with Redis down tried %d connections, want %d", tc.url, got, tc.dials)
		}
	}
}

// TestRedisClientHonoursDeadlines: the server's client gives up on a
// stuck Redis at its context's deadline, even when the URL allows reads a
// minute long, so that the limiter's bound holds.
func TestRedisClientHonoursDeadlines(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // accepted, never answered
		}
	}()
	rdb, _, err := newRedisClient("redis://"+ln.Addr().String()+"/0?read_timeout=1m&write_timeout=1m", false, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rdb.Ping(ctx).Err() }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("ping of a stuck Redis: %v, want its deadline", err)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ping of a stuck Redis still waiting 30 s after its 100 ms deadline")
	}
}
