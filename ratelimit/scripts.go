package ratelimit

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed sliding_window.lua
var slidingWindowLua string

//go:embed take_back.lua
var takeBackLua string

// slidingWindow decides a request against the rules whose keys it is
// given, all or none: count each window and, if every rule has room,
// record the request in all of them. It is run with EVALSHA, and with EVAL
// when Redis lost its script cache (a restart or failover).
var slidingWindow = redis.NewScript(slidingWindowLua)

// takeBack removes one admission from a log, for a decision split over
// the slots of a cluster that some slot rejected.
var takeBack = redis.NewScript(takeBackLua)
