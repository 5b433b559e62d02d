-- Begins an attempt against an identity's lockout: one whose failure, if
-- it is one, is yet to be counted (lockout.lua), such as a password being
-- checked. It is refused while the identity is locked, and while the
-- failures counted and the attempts in flight reach the threshold
-- together, so that no number of guesses sent at once is checked past the
-- lock. An identity with nothing in flight is never refused by it: only a
-- lock refuses that one. An attempt the identity already failed with,
-- which lockout.lua would not count again, goes ahead without a place. All
-- four keys share one hash tag.
--
-- KEYS[1]  lock (see lockout.lua)
-- KEYS[2]  failures (see lockout.lua)
-- KEYS[3]  in flight: a sorted set of the attempts begun and not ended,
--          each scored by when it stops counting, milliseconds since the
--          epoch of Redis' clock
-- KEYS[4]  attempts: the identity's recent failed attempts (lockout.lua)
-- ARGV[1]  threshold: failures that lock (integer >= 1)
-- ARGV[2]  the attempt's token, unique
-- ARGV[3]  ttl, milliseconds: how long the attempt counts if never ended
-- ARGV[4]  the attempt's digest, "" for one that always counts
--
-- Returns {allowed (0|1|2), wait_ms, locked (0|1)}: 2 is allowed without a
-- place; a refusal's wait is the lock's time left, or the time until the
-- oldest attempt in flight stops counting if none ends first (never 0).
local left = redis.call('PTTL', KEYS[1])
if left > 0 then
  -- PTTL is whole milliseconds; one more keeps the wait from being early.
  return {0, left + 1, 1}
end
if ARGV[4] ~= '' and redis.call('LPOS', KEYS[4], ARGV[4]) then
  return {2, 0, 0}
end
local threshold = tonumber(ARGV[1])
local ttl = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local flying = redis.call('ZCARD', KEYS[3])
if flying > 0 and (tonumber(redis.call('GET', KEYS[2])) or 0) + flying >= threshold then
  local oldest = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  return {0, math.max(tonumber(oldest[2]) - now, 1), 0}
end
redis.call('ZADD', KEYS[3], now + ttl, ARGV[2])
-- The set lasts as long as its latest attempt counts: a shorter ttl than
-- one in flight never cuts that one short. A new set has no expiry (-1).
if redis.call('PTTL', KEYS[3]) < ttl then
  redis.call('PEXPIRE', KEYS[3], ttl)
end
return {1, 0, 0}
