package ratelimit_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

// refusingRedis returns a client of an address nothing listens on: every
// dial is refused, as when Redis is down.
func refusingRedis(t *testing.T) *redis.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

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
// decision still ends within the Failover's bound, not after the client
// gives up. A slow answer alone is not taken for an outage (a replica
// queueing under a flood looks the same); it fails that one decision and a
// probe, whose pings a stuck Redis does not answer either, then switches
// the limits to the failure policy.
func TestFailoverDecidesWithinTimeout(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: hangingRedis(t), ReadTimeout: time.Minute, WriteTimeout: time.Minute,
		ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	f := newFailover(t, rdb, ratelimit.FailLocal)
	f.SetTimeout(200 * time.Millisecond)
	rule := ratelimit.Rule{Name: "login_account", ID: "stuck", Limit: ratelimit.PerMinute(5), Lockable: true}

	got := make(chan error, 1)
	go func() {
		_, err := f.AllowAll(t.Context(), rule)
		got <- err
	}()
	select {
	case err := <-got:
		if !errors.Is(err, ratelimit.ErrRedisSlow) || f.Degraded() {
			t.Fatalf("first decision with Redis stuck: %v, degraded %v; want ErrRedisSlow and the shared limits kept for now", err, f.Degraded())
		}
	case <-time.After(30 * time.Second):
		// The bound is 200 ms; the client alone would wait minutes.
		t.Fatal("no decision 30 s after asking a stuck Redis")
	}
	deadline := time.Now().Add(30 * time.Second)
	for !f.Degraded() {
		if time.Now().After(deadline) {
			t.Fatal("the probe did not take a Redis that answers no ping for gone")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d, err := f.AllowAll(t.Context(), rule); err != nil || !d.Allowed {
		t.Fatalf("decision once the outage is confirmed: %+v, %v; want admitted by the local policy", d, err)
	}
}

// TestQueueForConnectionsIsNotAnOutage: a replica whose requests wait
// longer than the bound for a connection (here: its one connection, held
// by a slow command for longer than the probe's three pings take) fails
// those requests but keeps the shared limits, since Redis answers the
// pings the probe sends through a client of its own; falling back to
// in-process limits under a flood would admit what the shared limits
// refuse.
func TestQueueForConnectionsIsNotAnOutage(t *testing.T) {
	srv := testenv.PrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 1, PoolTimeout: time.Minute,
		ReadTimeout: 10 * time.Second, ContextTimeoutEnabled: true})
	probe := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 1})
	t.Cleanup(func() { rdb.Close(); probe.Close() })
	f := newFailover(t, rdb, ratelimit.FailLocal)
	f.SetTimeout(200 * time.Millisecond)
	f.SetProbeClient(probe)
	// Room for the decisions asked for again below.
	rule := ratelimit.Rule{Name: "login_account", ID: "queued", Limit: ratelimit.PerMinute(100), Lockable: true}

	held := make(chan struct{})
	go func() {
		defer close(held)
		rdb.BLPop(t.Context(), 5*time.Second, "nothing-comes") // holds the one connection
	}()
	waitBlocked(t, srv.Addr(), "blpop")
	if _, err := f.AllowAll(t.Context(), rule); !errors.Is(err, ratelimit.ErrRedisSlow) {
		t.Fatalf("decision while the only connection is busy: %v, want ErrRedisSlow", err)
	}
	<-held
	if f.Degraded() {
		t.Fatal("a queue for connections was taken for Redis gone")
	}
	// Decided by Redis again. The bound is 200 ms: on a loaded machine an
	// answer may come later than that, and is asked for again.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d, err := f.AllowAll(t.Context(), rule)
		if err == nil && d.Allowed && !f.Degraded() {
			break
		}
		if !errors.Is(err, ratelimit.ErrRedisSlow) || time.Now().After(deadline) {
			t.Fatalf("decision once the connection is free: %+v, %v, degraded %v", d, err, f.Degraded())
		}
	}
}

// waitBlocked waits, within a generous bound, until a client of the Redis
// at addr is blocked in cmd: the goroutine that sends it may be slow to
// run on a loaded machine.
func waitBlocked(t *testing.T, addr, cmd string) {
	t.Helper()
	look := redis.NewClient(&redis.Options{Addr: addr})
	defer look.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		clients, err := look.ClientList(t.Context()).Result()
		for c := range strings.Lines(clients) {
			if strings.Contains(c, " flags=b ") && strings.Contains(c, " cmd="+cmd+" ") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no client blocked in %s after 10 s: %v\n%s", cmd, err, clients)
		}
	}
}
