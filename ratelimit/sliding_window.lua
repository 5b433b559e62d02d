-- Sliding-window log: one sorted set per (rule, identity) holding the
-- admission times, in microseconds of Redis' own clock, of the requests
-- admitted in the last window.
--
-- KEYS[1]  the log (hash-tagged)
-- KEYS[2]  optional: the identity's lock (same hash tag; see lockout.lua);
--          while it exists the rule rejects, whatever the log says
-- ARGV[1]  limit: requests admitted per window (integer >= 1)
-- ARGV[2]  window in microseconds (integer >= 1000)
-- ARGV[3]  member: a caller-chosen random nonce naming this admission, so
--          that the caller can take it back and no sequence key is needed
--
-- Returns {allowed (0|1), count, retry_after_us, locked (0|1)}:
--   count           requests in the window, this one included when allowed
--   retry_after_us  when rejected, microseconds until the oldest entry that
--                   must leave has left, or until the lock ends; 0 when allowed
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local member = ARGV[3]

-- One clock for every replica: Redis' TIME, never the caller's.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- Numbers near 2^51 print as 1.7e+15 through tostring; %d keeps every digit.
local horizon = string.format('%d', now - window)

-- Counting is read-only, so a rejected request changes nothing in Redis.
local count = redis.call('ZCOUNT', key, '(' .. horizon, '+inf')
if #KEYS > 1 then
  local locked = redis.call('PTTL', KEYS[2])
  if locked > 0 then
    -- PTTL is whole milliseconds; one more keeps the answer from being early.
    return {0, count, (locked + 1) * 1000, 1}
  end
end
if count >= limit then
  -- For one slot to free, the count-limit+1 oldest live entries must leave;
  -- the youngest of them is live entry number count-limit, counting from 0.
  local entry = redis.call('ZRANGEBYSCORE', key, '(' .. horizon, '+inf', 'WITHSCORES', 'LIMIT', count - limit, 1)
  -- An entry leaves once now >= score + window, so this is never early and,
  -- since the entry is live, never zero.
  return {0, count, tonumber(entry[2]) + window - now, 0}
end

redis.call('ZREMRANGEBYSCORE', key, '-inf', horizon)
if redis.call('ZADD', key, string.format('%d', now), member) == 0 then
  -- A reused nonce would admit without counting: refuse rather than over-admit.
  return redis.error_reply('ERR ratelimit: duplicate admission id')
end
-- The newest entry leaves the window in exactly one window; so does the key.
redis.call('PEXPIRE', key, math.ceil(window / 1000))
return {1, count + 1, 0, 0}
