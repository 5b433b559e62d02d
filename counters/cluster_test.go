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
	// The reads go through a client that waits seconds: the 100 ms the
	// writes under test are given is short for a loaded machine.
	patient := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.ClusterAddrs(t), MaxRetries: -1})
	t.Cleanup(func() { _ = patient.Close() })
	reader, err := New(patient, prefix)
	if err != nil {
		t.Fatal(err)
	}
	// giveAgain gives a batch that failed again, as the Recorder does,
	// until it is answered within the read timeout, which on a loaded
	// machine it may not be at once: each send after the first must
	// count nothing.
	giveAgain := func(b []auth.Event) {
		t.Helper()
		for i := 1; ; i++ {
			err := s.CountEvents(t.Context(), b)
			if err == nil {
				return
			}
			if i == 20 {
				t.Fatalf("a batch given again %d times: %v", i, err)
			}
		}
	}
	now := time.Date(2025, 3, 10, 12, 34, 30, 0, time.UTC)
	node, err := patient.MasterForKey(t.Context(), s.minuteKey("m", unixMinute(now)))
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
		// Ended as soon as the call has given up: paused for far longer
		// than a loaded machine may take to send it.
		unpause := testenv.PauseWrites(t, c, s.minuteKey("m", unixMinute(now)), 10*time.Second)
		tx.sends.Store(0)
		err := tc.count(t.Context())
		if got := tx.sends.Load(); got != 1 {
			t.Errorf("%s: its transaction was sent %d times, want once", tc.name, got)
		} else if err == nil {
			t.Fatalf("%s was answered within its read timeout while Redis was paused", tc.name)
		}
		unpause()
	}
	giveAgain(batch)

	// A batch whose transaction waits behind the script past the read
	// timeout. Sent so late (a loaded machine's pause) that the script
	// had all but ended, it is answered in time and shows nothing: it is
	// counted, and another account's batch tried.
	batches := int64(1)
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			t.Fatal("5 transactions in a row were answered within their read timeout behind a slow script")
		}
		later := []auth.Event{{At: now, Kind: auth.EventLoginFailed, Account: fmt.Sprintf("b%d@example.com", attempt)}}
		batches++
		var ended <-chan struct{}
		hold := func() { ended = slow(300 * time.Millisecond) }
		tx.before.Store(&hold)
		err := s.CountEvents(t.Context(), later)
		// The script has ended: the transaction queued behind it runs
		// before the batch given again, which reaches the master after it.
		<-ended
		if err == nil {
			t.Logf("attempt %d: the transaction was answered within its read timeout behind the slow script; again", attempt+1)
			continue
		}
		giveAgain(later)
		break
	}
	sum, err := reader.Summary(t.Context(), dashboard.Period5m, now)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Attempts != batches || sum.Failures != batches {
		t.Errorf("%d attempts, %d failures; want each of the %d counted once", sum.Attempts, sum.Failures, batches)
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
