package attack_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/attack"
	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
)

// TestCluster: on a Redis Cluster, two replicas' halves of an attack sum
// to a trip, and the panel's multi-key reads (PFCOUNT, ZUNIONSTORE) work,
// every key of the watch sharing one slot.
func TestCluster(t *testing.T) {
	rdb, prefix := testenv.RedisCluster(t)
	other, _ := testenv.RedisCluster(t)
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	log := &eventLog{}
	a, err := attack.New(attack.DefaultConfig(), attack.Deps{Redis: rdb, Prefix: prefix, Events: log, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	b, err := attack.New(attack.DefaultConfig(), attack.Deps{Redis: other, Prefix: prefix, Events: log, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	feed(a, clk, 12, auth.OutcomeUnknownAccount, "a")
	feed(b, clk, 12, auth.OutcomeUnknownAccount, "b")
	tick(t, a, b, a)
	if !a.Active() || !b.Active() {
		t.Fatal("the halves on a cluster did not switch attack mode on")
	}
	st, err := b.AttackStatus(t.Context(), clk.Now())
	if err != nil || !st.Active || st.UnknownAccounts != 24 || st.DistinctAccounts != 24 || st.DistinctNetworks != 12 || len(st.TopNetworks) == 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
	if got := log.kinds(); got[auth.EventAttackStarted] != 1 {
		t.Fatalf("events %v", got)
	}
}

// TestClusterSendsWritesOnce: on a real cluster, through a client set as
// xcloak serve sets it (MaxRetries -1, a read timeout of a second), while the master of the watch's
// slot holds writes past the client's read timeout (as a slow script or
// a paused machine would), the flush and state.lua are each sent once,
// where go-redis sends its own commands again; and the ticks after it,
// once Redis answers, count each attempt once.
func TestClusterSendsWritesOnce(t *testing.T) {
	_, prefix := testenv.RedisCluster(t)
	sends := &writeCounter{prefix: prefix}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.ClusterAddrs(t),
		ReadTimeout: time.Second, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	c.OnNewNode(func(n *redis.Client) { n.AddHook(sends) })
	cfg := attack.DefaultConfig()
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	log := &eventLog{}
	w, err := attack.New(cfg, attack.Deps{Redis: c, Prefix: prefix, Events: log, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	// An hour before, so that Redis knows the scripts: a paused EVALSHA
	// it did not know would run nothing.
	clk.Add(-time.Hour)
	feed(w, clk, 1, auth.OutcomeSucceeded, "earlier")
	tick(t, w)
	clk.Add(time.Hour)
	// pausedTick ticks w while Redis is paused: what writes, sent once.
	// The pause ends as soon as the tick has given up: it lasts far
	// longer than a loaded machine may take to send the write.
	pausedTick := func(what string) {
		t.Helper()
		unpause := pause(t, c, prefix, 10*time.Second)
		sends.n.Store(0)
		err := w.Tick(t.Context())
		if got := sends.n.Load(); got != 1 {
			t.Errorf("%s was sent %d times, want once", what, got)
		} else if err == nil {
			t.Fatalf("%s was answered within its read timeout while Redis was paused", what)
		}
		unpause()
	}

	feed(w, clk, 25, auth.OutcomeUnknownAccount, "a")
	pausedTick("the flush")
	tick(t, w) // sends the flush again, and state.lua records the trip
	if got := log.kinds()[auth.EventAttackStarted]; got != 1 {
		t.Fatalf("%d attack_started events, want 1", got)
	}

	clk.Add(cfg.Quiet) // nothing to flush: state.lua ends attack mode
	pausedTick("state.lua")

	st, err := w.AttackStatus(t.Context(), clk.Now().Add(-cfg.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	if st.Attempts != 25 || st.UnknownAccounts != 25 || st.TopNetworks[0].Count != 1 {
		t.Errorf("status %+v; want each of the 25 attempts counted once", st)
	}
}

// writeCounter counts the sends, by the node clients, of commands and
// pipelines that write to keys under prefix.
type writeCounter struct {
	prefix string
	n      atomic.Int64
}

func (h *writeCounter) writes(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "evalsha", "eval", "hincrby", "zincrby", "pfadd":
		return slices.ContainsFunc(cmd.Args(), func(a any) bool {
			s, ok := a.(string)
			return ok && strings.HasPrefix(s, h.prefix)
		})
	}
	return false
}

func (*writeCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *writeCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.writes(cmd) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *writeCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if slices.ContainsFunc(cmds, h.writes) {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// watchKey returns a key of the watch's under prefix: they share one slot.
func watchKey(t *testing.T, c *redis.ClusterClient, prefix string) string {
	t.Helper()
	var key string
	err := c.ForEachMaster(t.Context(), func(ctx context.Context, n *redis.Client) error {
		keys, _, err := n.Scan(ctx, 0, prefix+"*", 1000).Result()
		if len(keys) > 0 {
			key = keys[0]
		}
		return err
	})
	if err != nil || key == "" {
		t.Fatalf("no key of the watch's under %s: %v", prefix, err)
	}
	return key
}

// pause holds the writes of every client of the watch's master for d,
// past the client's read timeout.
func pause(t *testing.T, c *redis.ClusterClient, prefix string, d time.Duration) (unpause func()) {
	t.Helper()
	return testenv.PauseWrites(t, c, watchKey(t, c, prefix), d)
}
