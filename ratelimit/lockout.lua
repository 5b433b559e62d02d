-- Lockout: consecutive failures per identity; at the threshold the identity
-- is locked, for longer at each repeat. All three keys share one hash tag.
--
-- KEYS[1]  failures: consecutive failures since the last lock or success
-- KEYS[2]  level: how many times the identity was locked recently
-- KEYS[3]  lock: exists while the identity is locked; holds the level
-- ARGV[1]  threshold: failures that lock (integer >= 1)
-- ARGV[2]  first lock duration, milliseconds
-- ARGV[3]  longest lock duration, milliseconds
-- ARGV[4]  memory, milliseconds: failures and level are forgotten after
--          this long without a new failure (level: after the lock ends)
--
-- Returns {locked_now (0|1), failures, level, lock_ms}: locked_now is 1 for
-- exactly one failure per lock, however many arrive at once, so exactly one
-- caller records the lockout. While locked, failures are not counted and
-- lock_ms is the time left.
local threshold = tonumber(ARGV[1])
local base = tonumber(ARGV[2])
local longest = tonumber(ARGV[3])
local memory = tonumber(ARGV[4])

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
-- base * 2^(level-1), capped; the exponent is capped first so it stays finite.
local duration = math.min(base * 2 ^ math.min(level - 1, 40), longest)
redis.call('SET', KEYS[3], level, 'PX', duration)
redis.call('PEXPIRE', KEYS[2], duration + memory)
redis.call('DEL', KEYS[1])
return {1, failures, level, duration}
