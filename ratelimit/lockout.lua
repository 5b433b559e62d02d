-- Lockout: consecutive failures per identity; at the threshold the identity
-- is locked, for longer at each repeat. All three keys share one hash tag.
-- How long each lock lasts is the caller's policy (LockoutPolicy.LockFor),
-- computed once in Go and passed in, so that Redis and the in-process store
-- cannot escalate differently.
--
-- KEYS[1]  failures: consecutive failures since the last lock or success
-- KEYS[2]  level: how many times the identity was locked recently
-- KEYS[3]  lock: exists while the identity is locked; holds the level
-- ARGV[1]  threshold: failures that lock (integer >= 1)
-- ARGV[2]  memory, milliseconds: failures and level are forgotten after
--          this long without a new failure (level: after the lock ends)
-- ARGV[3..] lock durations in milliseconds for levels 1, 2, ...; the last
--          one applies to every higher level (the cap)
--
-- Returns {locked_now (0|1), failures, level, lock_ms}: locked_now is 1 for
-- exactly one failure per lock, however many arrive at once, so exactly one
-- caller records the lockout. While locked, failures are not counted and
-- lock_ms is the time left.
local threshold = tonumber(ARGV[1])
local memory = tonumber(ARGV[2])
local levels = #ARGV - 2

local left = redis.call('PTTL', KEYS[3])
if left > 0 then
  return {0, 0, tonumber(redis.call('GET', KEYS[3])) or 0, left}
end

local failures = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], memory)
if failures < threshold then
  return {0, failures, tonumber(redis.call('GET', KEYS[2])) or 0, 0}
end

local level = redis.call('INCR', KEYS[2])
local duration = tonumber(ARGV[2 + math.min(level, levels)])
redis.call('SET', KEYS[3], level, 'PX', duration)
redis.call('PEXPIRE', KEYS[2], duration + memory)
redis.call('DEL', KEYS[1])
return {1, failures, level, duration}
