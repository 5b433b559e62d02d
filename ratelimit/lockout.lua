-- Lockout: consecutive failures per identity; at the threshold the identity
-- is locked, for longer at each repeat. All four keys share one hash tag.
-- How long each lock lasts is the caller's policy (LockoutPolicy.LockFor),
-- computed once in Go and passed in, so that Redis and the in-process store
-- cannot escalate differently.
--
-- A failure may carry an attempt: a digest of what was tried (a password's
-- fingerprint). An attempt the identity already failed with, among its
-- last few, is not counted again: retyping the same wrong password tells
-- nothing new, so it must not lock its owner out (smart lockout).
--
-- KEYS[1]  failures: consecutive failures since the last lock or success
-- KEYS[2]  level: how many times the identity was locked recently
-- KEYS[3]  lock: exists while the identity is locked; holds the level
--          and when the lock began, "level:milliseconds since the epoch"
--          (a lock written before starts were kept holds the level alone)
-- KEYS[4]  attempts: list of the identity's recent failed attempts, newest
--          first, at most ARGV[4] long
-- ARGV[1]  threshold: failures that lock (integer >= 1)
-- ARGV[2]  memory, milliseconds: failures, attempts and level are forgotten
--          after this long without a new failure (after the lock ends)
-- ARGV[3]  attempt: "" for a failure that always counts
-- ARGV[4]  how many distinct attempts are remembered (integer >= 1;
--          LockoutPolicy.RememberedAttempts)
-- ARGV[5..] lock durations in milliseconds for levels 1, 2, ...; the last
--          one applies to every higher level (the cap)
--
-- Returns {locked_now (0|1), failures, level, lock_ms}: locked_now is 1 for
-- exactly one failure per lock, however many arrive at once, so exactly one
-- caller records the lockout. While locked, failures are not counted and
-- lock_ms is the time left. A repeated attempt writes nothing and returns
-- the failures counted so far.
local threshold = tonumber(ARGV[1])
local memory = tonumber(ARGV[2])
local attempt = ARGV[3]
local remembered = tonumber(ARGV[4])
local levels = #ARGV - 4

local left = redis.call('PTTL', KEYS[3])
if left > 0 then
  local lock = redis.call('GET', KEYS[3]) or ''
  return {0, 0, tonumber(string.match(lock, '^%d+')) or 0, left}
end

if attempt ~= '' then
  if redis.call('LPOS', KEYS[4], attempt) then
    return {0, tonumber(redis.call('GET', KEYS[1])) or 0, tonumber(redis.call('GET', KEYS[2])) or 0, 0}
  end
  redis.call('LPUSH', KEYS[4], attempt)
  redis.call('LTRIM', KEYS[4], 0, remembered - 1)
end

local failures = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], memory)
redis.call('PEXPIRE', KEYS[4], memory)
if failures < threshold then
  return {0, failures, tonumber(redis.call('GET', KEYS[2])) or 0, 0}
end

local level = redis.call('INCR', KEYS[2])
local duration = tonumber(ARGV[4 + math.min(level, levels)])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[3], level .. ':' .. now, 'PX', duration)
redis.call('PEXPIRE', KEYS[2], duration + memory)
-- The attempts outlive the lock as the level does: a password that failed
-- before the lock still tells nothing new after it.
redis.call('PEXPIRE', KEYS[4], duration + memory)
redis.call('DEL', KEYS[1])
return {1, failures, level, duration}
