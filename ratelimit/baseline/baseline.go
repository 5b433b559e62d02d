// Package baseline keeps the two limiters of XCloak's seed design, defects
// and all, so that tests, benchmarks and the credential-stuffing simulator can
// show what package ratelimit fixes. Nothing that serves requests may import
// it; a test in this package checks that the server binary does not.
//
//   - [CheckThenAct] counts in one round trip and records in another, so
//     concurrent requests that all see room are all admitted.
//   - [SeedScript] is the seed's Lua fix: atomic, but it builds a key inside
//     the script (fails on Redis Cluster when that key lives on another
//     node), leaves that key without a TTL, and trusts the caller's clock.
package baseline

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// CheckThenAct is the seed's naive sliding-window limiter: a pipeline of
// ZREMRANGEBYSCORE and ZCARD, then, if the count was below the limit, a
// separate ZADD. Between the two round trips other requests see the same
// count: the time-of-check to time-of-use race.
type CheckThenAct struct {
	rdb redis.UniversalClient
	seq atomic.Uint64
}

// NewCheckThenAct returns the naive limiter on rdb.
func NewCheckThenAct(rdb redis.UniversalClient) *CheckThenAct {
	return &CheckThenAct{rdb: rdb}
}

// Allow admits a request under key if fewer than limit requests were
// admitted in the last window, by the caller's clock.
func (b *CheckThenAct) Allow(ctx context.Context, key string, limit int, window time.Duration) (bool, error) {
	now := time.Now().UnixMilli()
	windowStart := strconv.FormatInt(now-window.Milliseconds(), 10)

	pipe := b.rdb.Pipeline()
	pipe.ZRemRangeByScore(ctx, key, "-inf", windowStart)
	card := pipe.ZCard(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil {
		return false, err
	}
	if card.Val() >= int64(limit) {
		return false, nil
	}
	// The seed used the timestamp as the member; a process-local sequence
	// keeps same-millisecond admissions apart so that the count is honest
	// about how many were admitted.
	member := fmt.Sprintf("%d-%d", now, b.seq.Add(1))
	// Like the seed, no expiry: the key outlives its last entry forever.
	if err := b.rdb.ZAdd(ctx, key, redis.Z{Score: float64(now), Member: member}).Err(); err != nil {
		return false, err
	}
	return true, nil
}

//go:embed seed.lua
var seedLua string

var seedScript = redis.NewScript(seedLua)

// SeedScript is the seed's atomic Lua limiter, unchanged.
type SeedScript struct {
	rdb redis.UniversalClient
}

// NewSeedScript returns the seed's Lua limiter on rdb.
func NewSeedScript(rdb redis.UniversalClient) *SeedScript {
	return &SeedScript{rdb: rdb}
}

// Allow runs the seed's script for key with the caller's clock. On a Redis
// Cluster it fails whenever key..":seq" hashes to another node.
func (s *SeedScript) Allow(ctx context.Context, key string, limit int, window time.Duration) (bool, error) {
	n, err := seedScript.Run(ctx, s.rdb, []string{key}, time.Now().UnixMilli(), window.Milliseconds(), limit).Int()
	return n == 1, err
}
