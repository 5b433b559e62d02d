package ratelimit_test

import (
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/ratelimit"
)

// hangingRedis accepts connections and never answers, as a Redis that is
// stuck (or a network that drops packets) does.
func hangingRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return ln.Addr().String()
}

// TestFailoverDecidesWithinTimeout: with a Redis that does not answer and
// a client that would wait a minute for each of its retries, the first
// decision still comes from the failure policy within the Failover's
// bound, not after the client gives up.
func TestFailoverDecidesWithinTimeout(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: hangingRedis(t), ReadTimeout: time.Minute, WriteTimeout: time.Minute,
		ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	f := newFailover(t, rdb, ratelimit.FailLocal)
	f.SetTimeout(200 * time.Millisecond)
	rule := ratelimit.Rule{Name: "login_account", ID: "stuck", Limit: ratelimit.PerMinute(5), Lockable: true}

	type answer struct {
		d   ratelimit.Decision
		err error
	}
	got := make(chan answer, 1)
	go func() {
		d, err := f.AllowAll(t.Context(), rule)
		got <- answer{d, err}
	}()
	select {
	case a := <-got:
		if a.err != nil || !a.d.Allowed || !f.Degraded() {
			t.Fatalf("first decision with Redis stuck: %+v, %v, degraded %v; want admitted by the local policy", a.d, a.err, f.Degraded())
		}
	case <-time.After(30 * time.Second):
		// The bound is 200 ms; the client alone would wait minutes.
		t.Fatal("no decision 30 s after asking a stuck Redis")
	}
}
