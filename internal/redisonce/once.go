// Package redisonce makes Redis commands that must run at most once: a
// script that records an attempt or counts a failure, a batch of
// increments. Sent twice, such a command counts twice.
//
// go-redis' cluster client sends a command again after a read timeout, a
// dropped connection or EOF, up to ClusterOptions.MaxRedirects times,
// whatever MaxRetries says. Redis may have run the first one and only its
// answer been lost, so the second counts the same request again. A Cmd
// made here tells go-redis not to: its NoRetry is true, which the cluster
// client heeds for the command, and for every pipeline that holds it. MOVED and ASK
// replies, which Redis gives without running the command, are still
// followed. A client of one Redis (or of a Sentinel-managed primary) does
// not retry at all when MaxRetries is -1, as xcloak serve sets it.
package redisonce

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Cmd is a *redis.Cmd that go-redis never sends again once it may have
// reached Redis. Read its result through the embedded Cmd.
type Cmd struct{ *redis.Cmd }

// NoRetry reports true: see the package documentation.
func (Cmd) NoRetry() bool { return true }

// NewCmd returns a command of args, as redis.NewCmd does.
func NewCmd(ctx context.Context, args ...any) Cmd {
	return Cmd{redis.NewCmd(ctx, args...)}
}

// EvalSha returns the EVALSHA of the script whose SHA-1 is sha, with keys
// and args, for c (a client or a pipeline) to process. Its first key
// names the cluster slot.
func EvalSha(ctx context.Context, sha string, keys []string, args ...any) Cmd {
	return eval(ctx, "evalsha", sha, keys, args)
}

// Eval is EvalSha with the script's source, for when Redis answered
// NOSCRIPT.
func Eval(ctx context.Context, script string, keys []string, args ...any) Cmd {
	return eval(ctx, "eval", script, keys, args)
}

func eval(ctx context.Context, name, script string, keys []string, args []any) Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, script, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	c := NewCmd(ctx, a...)
	if len(keys) > 0 {
		c.SetFirstKeyPos(3)
	}
	return c
}
