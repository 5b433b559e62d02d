package ratelimit_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

// TestRedisOutOfMemoryFollowsThePolicy: a Redis that answers but refuses
// every write, because it is out of memory (OOM under maxmemory with
// noeviction, which a flood of identities can bring about) or cannot
// persist (MISCONF), serves no decision, as one that is unreachable does
// not: under the local policy the limits are then kept in process, rather
// than every decision failing for as long as it lasts.
func TestRedisOutOfMemoryFollowsThePolicy(t *testing.T) {
	srv := testenv.PrivateRedis(t)
	rdb := fastClient(t, srv.URL())
	var probes probeDecisions
	rdb.AddHook(&probes)
	f := newFailover(t, rdb, ratelimit.FailLocal)
	rule := ratelimit.Rule{Name: "login_account", ID: "victim", Limit: ratelimit.Limit{Count: 3, Window: time.Minute}, Lockable: true}
	if d, err := f.AllowAll(t.Context(), rule); err != nil || !d.Allowed {
		t.Fatalf("with Redis serving: %+v, %v", d, err)
	}
	if err := rdb.ConfigSet(t.Context(), "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.ConfigSet(t.Context(), "maxmemory", "0") })
	admitted := 0
	for range 10 {
		d, err := f.AllowAll(t.Context(), ratelimit.Rule{Name: rule.Name, ID: "another", Limit: rule.Limit, Lockable: true})
		if err != nil {
			t.Fatalf("a decision while Redis is out of memory, under the local policy: %v", err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if !f.Degraded() || admitted != 3 {
		t.Errorf("while Redis is out of memory: degraded %v, admitted %d of 10; want degraded, the limit 3 kept in process", f.Degraded(), admitted)
	}
	// Nor does the replica go back to it while it answers pings but still
	// refuses writes, to leave it again at the next decision: with no
	// lock to hand back, the failback writes nothing of its own.
	// Three failbacks tried, however long a loaded machine takes.
	for deadline := time.Now().Add(30 * time.Second); probes.n.Load() < 3 && f.Degraded(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d failbacks tried in 30 s, want 3", probes.n.Load())
		}
	}
	if !f.Degraded() {
		t.Error("the limits went back to a Redis that answers pings but refuses every write")
	}
	// Once it takes writes again, the limits go back to it.
	if err := rdb.ConfigSet(t.Context(), "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	waitRecovered(t, f)
	if d, err := f.AllowAll(t.Context(), rule); err != nil || !d.Allowed || f.Degraded() {
		t.Errorf("once Redis takes writes again: %+v, %v, degraded %v", d, err, f.Degraded())
	}
}

// probeDecisions counts the decisions a client sends for the failback's
// own rule: one at each failback tried.
type probeDecisions struct{ n atomic.Int64 }

func (p *probeDecisions) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *probeDecisions) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		for _, a := range cmd.Args() {
			if s, ok := a.(*string); ok {
				a = *s
			}
			if s, ok := a.(string); ok && strings.Contains(s, "{failback_probe:") {
				p.n.Add(1)
				break
			}
		}
		return next(ctx, cmd)
	}
}

func (p *probeDecisions) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
