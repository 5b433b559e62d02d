package redisonce_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/redisonce"
	"github.com/xcloak/xcloak/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestNotSentAgain: a script whose answer comes too late for the client's
// read timeout, on a real cluster through the client xcloak serve would
// make (MaxRetries -1), is sent to Redis once; go-redis' own command, the
// control, is sent again. What counts is the sending: once a command has
// gone, Redis may run it whatever becomes of its answer.
func TestNotSentAgain(t *testing.T) {
	_, prefix := testenv.RedisCluster(t)
	sends := map[string]*atomic.Int64{}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.ClusterAddrs(t),
		ReadTimeout: 100 * time.Millisecond, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	c.OnNewNode(func(n *redis.Client) { n.AddHook(counter{sends}) })
	const script = `return redis.call('INCR', KEYS[1])`
	sha := redis.NewScript(script).Hash()
	if err := c.ForEachMaster(t.Context(), func(ctx context.Context, n *redis.Client) error {
		return n.ScriptLoad(ctx, script).Err()
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cmd  func(ctx context.Context, key string) redis.Cmder
		once bool
	}{
		{"go-redis' EvalSha", func(ctx context.Context, key string) redis.Cmder {
			return redis.NewCmd(ctx, "evalsha", sha, 1, key)
		}, false},
		{"redisonce.EvalSha", func(ctx context.Context, key string) redis.Cmder {
			return redisonce.EvalSha(ctx, sha, []string{key})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := prefix + "{" + tc.name + "}"
			sends[key] = new(atomic.Int64)
			// Paused until the subtest ends: a pause of 300 ms, which a
			// loaded machine could spend before the command went, would
			// let it be answered in time.
			testenv.PauseWrites(t, c, key, 10*time.Second)
			cmd := tc.cmd(t.Context(), key)
			err := c.Process(t.Context(), cmd)
			if tc.once && err == nil {
				t.Fatal("the command was answered within its read timeout while Redis was paused")
			}
			switch got := sends[key].Load(); {
			case tc.once && got != 1:
				t.Errorf("one command was sent %d times, want once", got)
			case !tc.once && got < 2:
				t.Errorf("go-redis sent its command %d times: it no longer sends one again, and the test shows nothing", got)
			}
		})
	}
}

// counter counts, under each key it was given, the commands on it the
// node clients send.
type counter struct{ sends map[string]*atomic.Int64 }

func (counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 3 {
			if key, ok := args[3].(string); ok && h.sends[key] != nil {
				h.sends[key].Add(1)
			}
		}
		return next(ctx, cmd)
	}
}
