package counters

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/testenv"
)

// TestClusterCountsOnce: on a real cluster, through a client set as
// xcloak serve sets it (MaxRetries -1), the transactions of CountEvents
// and CountWebhooksDropped are sent once while the master of the
// counters' slot holds writes past the client's read timeout (as a
// paused machine would); and a batch whose transaction Redis ran after
// the client gave up on it (behind a slow script) is counted once when
// given again, as the Recorder does.
func TestClusterCountsOnce(t *testing.T) {
	_, prefix := testenv.RedisCluster(t)
	tx := &txHook{prefix: prefix}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.ClusterAddrs(t),
		ReadTimeout: 100 * time.Millisecond, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	c.OnNewNode(func(n *redis.Client) { n.AddHook(tx) })
	s, err := New(c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 3, 10, 12, 34, 30, 0, time.UTC)
	node, err := c.MasterForKey(t.Context(), s.minuteKey("m", unixMinute(now)))
	if err != nil {
		t.Fatal(err)
	}
	// slow holds the master with a script for d. It returns once the
	// script is in the master's socket, on a connection the master serves,
	// ahead of every command sent after it: waiting for a goroutine to
	// send it instead, a loaded machine may send the transaction first.
	// What it returns is closed once the script has ended.
	slow := func(d time.Duration) <-chan struct{} {
		t.Helper()
		conn, err := net.Dial("tcp", node.Options().Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		r := bufio.NewReader(conn)
		if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n"); err != nil {
			t.Fatal(err)
		}
		if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
			t.Fatalf("PING: %q, %v", line, err)
		}
		script := `local t0 = redis.call('TIME')
			repeat local t = redis.call('TIME') until (t[1] - t0[1]) * 1e6 + t[2] - t0[2] >= tonumber(ARGV[1])`
		arg := strconv.FormatInt(d.Microseconds(), 10)
		if _, err := fmt.Fprintf(conn, "*4\r\n$4\r\nEVAL\r\n$%d\r\n%s\r\n$1\r\n0\r\n$%d\r\n%s\r\n", len(script), script, len(arg), arg); err != nil {
			t.Fatal(err)
		}
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			_, _ = r.ReadString('\n')
		}()
		return ended
	}
	batch := []auth.Event{{At: now, Kind: auth.EventLoginFailed, Account: "a@example.com"}}

	for _, tc := range []struct {
		name  string
		count func(context.Context) error
	}{
		{"CountEvents", func(ctx context.Context) error { return s.CountEvents(ctx, batch) }},
		{"CountWebhooksDropped", func(ctx context.Context) error { return s.CountWebhooksDropped(ctx, now, 1) }},
	} {
		unpause := testenv.PauseWrites(t, c, s.minuteKey("m", unixMinute(now)), 300*time.Millisecond)
		tx.sends.Store(0)
		err := tc.count(t.Context())
		if got := tx.sends.Load(); got != 1 {
			t.Errorf("%s: its transaction was sent %d times, want once", tc.name, got)
		} else if err == nil {
			t.Fatalf("%s was answered within its read timeout while Redis was paused", tc.name)
		}
		unpause()
	}
	if err := s.CountEvents(t.Context(), batch); err != nil { // as the Recorder does
		t.Fatal(err)
	}

	later := []auth.Event{{At: now, Kind: auth.EventLoginFailed, Account: "b@example.com"}}
	var ended <-chan struct{}
	hold := func() { ended = slow(300 * time.Millisecond) }
	tx.before.Store(&hold)
	if err := s.CountEvents(t.Context(), later); err == nil {
		t.Fatal("the transaction was answered within its read timeout behind a slow script")
	}
	// The script has ended: the transaction queued behind it runs
	// before the batch given again, which reaches the master after it.
	<-ended
	if err := s.CountEvents(t.Context(), later); err != nil { // as the Recorder does
		t.Fatal(err)
	}
	sum, err := s.Summary(t.Context(), dashboard.Period5m, now)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Attempts != 2 || sum.Failures != 2 {
		t.Errorf("%d attempts, %d failures; want each of the 2 counted once", sum.Attempts, sum.Failures)
	}
}

// txHook counts the transactions the node clients send that touch keys
// under prefix, and runs before, once, ahead of the next.
type txHook struct {
	prefix string
	sends  atomic.Int64
	before atomic.Pointer[func()]
}

func (*txHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*txHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *txHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		ours := slices.ContainsFunc(cmds, func(c redis.Cmder) bool {
			return slices.ContainsFunc(c.Args(), func(a any) bool {
				s, ok := a.(string)
				return ok && strings.HasPrefix(s, h.prefix)
			})
		})
		if ours && slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "exec" }) {
			h.sends.Add(1)
			if f := h.before.Swap(nil); f != nil {
				(*f)()
			}
		}
		return next(ctx, cmds)
	}
}
