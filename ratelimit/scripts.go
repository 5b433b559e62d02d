package ratelimit

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/redisonce"
)

//go:embed sliding_window.lua
var slidingWindowLua string

//go:embed take_back.lua
var takeBackLua string

// slidingWindow decides a request against the rules whose keys it is
// given, all or none: count each window and, if every rule has room,
// record the request in all of them.
var slidingWindow = newScript(slidingWindowLua)

// takeBack removes one admission from a log, for a decision split over
// the slots of a cluster that some slot rejected.
var takeBack = newScript(takeBackLua)

// script is one of the package's Lua scripts. Each of them writes, and
// counts what it is sent for (an admission, a failure), so it is sent as a
// redisonce command, which no client sends twice: after a read timeout
// Redis may have run the first. It is sent by EVALSHA, and by EVAL when
// Redis answered that it lost its script cache (a restart or failover):
// Redis ran nothing then.
type script struct {
	src string
	sha string // the SHA-1 of src, for EVALSHA
}

func newScript(src string) script {
	return script{src: src, sha: redis.NewScript(src).Hash()}
}

// run runs s once with keys and args.
func (s script) run(ctx context.Context, rdb redis.UniversalClient, keys []string, args ...any) *redis.Cmd {
	cmd := redisonce.EvalSha(ctx, s.sha, keys, args...)
	if err := rdb.Process(ctx, cmd); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = redisonce.Eval(ctx, s.src, keys, args...)
		_ = rdb.Process(ctx, cmd)
	}
	return cmd.Cmd
}

// runAll runs s n times in one pipeline, with the keys and arguments of
// each run; runs that met NOSCRIPT are sent again by EVAL. A pipeline that
// holds a redisonce command is not sent again either.
func (s script) runAll(ctx context.Context, rdb redis.UniversalClient, n int, of func(i int) ([]string, []any)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, n)
	pipe := rdb.Pipeline()
	for i := range n {
		ks, a := of(i)
		cmd := redisonce.EvalSha(ctx, s.sha, ks, a...)
		_ = pipe.Process(ctx, cmd)
		cmds[i] = cmd.Cmd
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe := rdb.Pipeline()
		for _, i := range again {
			ks, a := of(i)
			cmd := redisonce.Eval(ctx, s.src, ks, a...)
			_ = pipe.Process(ctx, cmd)
			cmds[i] = cmd.Cmd
		}
		_, _ = pipe.Exec(ctx)
	}
	return cmds
}
