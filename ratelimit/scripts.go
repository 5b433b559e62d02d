package ratelimit

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed sliding_window.lua
var slidingWindowLua string

// slidingWindow decides one rule: count the window and, if there is room,
// record the request. Script runs it with EVALSHA and falls back to EVAL when
// Redis lost its script cache (a restart or failover).
var slidingWindow = redis.NewScript(slidingWindowLua)
