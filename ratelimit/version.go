package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// MinRedisVersion is the oldest Redis the scripts run on: lockout.lua
// finds a retyped password with LPOS (Redis 6.0.6), and sliding_window.lua
// sets a log's expiry as an absolute time with SET's PXAT (Redis 6.2).
const MinRedisVersion = "6.2.0"

// CheckVersion asks the Redis behind rdb for its version and returns an
// error naming it if it is older than MinRedisVersion. On a cluster it
// asks one node; every node of a cluster runs one version in practice.
// A server that does not say its version is given the benefit of the
// doubt: the scripts' own errors will name what is missing.
func CheckVersion(ctx context.Context, rdb redis.UniversalClient) error {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("asking redis for its version: %w", err)
	}
	v, ok := infoField(info, "redis_version")
	if !ok {
		return nil
	}
	if older(v, MinRedisVersion) {
		return fmt.Errorf("redis %s is too old: XCloak needs %s or later", v, MinRedisVersion)
	}
	return nil
}

// infoField returns the value of name in the text of an INFO reply.
func infoField(info, name string) (string, bool) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v, true
		}
	}
	return "", false
}

// older reports whether dotted version v is older than min. Parts that
// are not numbers count as 0, so "7.2-rc1" is read as 7.2.0.
func older(v, min string) bool {
	a, b := strings.Split(v, "."), strings.Split(min, ".")
	for i := range max(len(a), len(b)) {
		x, y := part(a, i), part(b, i)
		if x != y {
			return x < y
		}
	}
	return false
}

func part(parts []string, i int) int {
	if i >= len(parts) {
		return 0
	}
	digits := parts[i]
	if end := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); end >= 0 {
		digits = digits[:end]
	}
	n, _ := strconv.Atoi(digits)
	return n
}
