-- Clear: ends an identity's lock, if any, and forgets its failures and the
-- attempts they were (a successful sign-in, an administrator's unlock).
-- The level is kept, to escalate a lock soon after, and remembered as
-- after a lock that runs out: for the memory after the lock's end, which
-- an unlock makes now. All four keys share one hash tag.
--
-- Given a time (ARGV[2]), it is an unlock made then, elsewhere (in process
-- while Redis was away), that Redis learns of later: it ends only what
-- came before it. A lock that began after it stands, and so do failures
-- of which the last came after it (with those before them: failures carry
-- no times of their own). A lock holds when it began (lockout.lua,
-- hold.lua); one that does not (held without it, or written before starts
-- were kept) is taken to have begun its level's length before it ends,
-- and one longer than that (an administrator's, held at level 1) has no
-- such start, and is ended as by any unlock. (A start held is never
-- later than Redis' clock was then: hold.lua.)
--
-- KEYS[1]  lock: exists while the identity is locked (see lockout.lua)
-- KEYS[2]  level: how many times the identity was locked recently
-- KEYS[3]  failures
-- KEYS[4]  attempts
-- ARGV[1]  memory, milliseconds: how long the level outlives the lock, and
--          failures their last
-- ARGV[2]  optional: when the unlock was made, milliseconds since the epoch
-- ARGV[3..] with ARGV[2]: lock durations in milliseconds for levels 1, 2,
--          ...; the last one applies to every higher level
--
-- Returns 1 if the identity was locked and is no longer, else 0.
local memory = tonumber(ARGV[1])
local keep = false
if #ARGV > 1 then
  local before = tonumber(ARGV[2])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then
    local lock = redis.call('GET', KEYS[1]) or ''
    local began = tonumber(string.match(lock, '^%d+:(%d+)$'))
    if not began then
      local level = math.max(tonumber(lock) or 1, 1)
      began = now + left - tonumber(ARGV[2 + math.min(level, #ARGV - 2)])
      if began > now then
        -- Worked out for a lock longer than its level's: no start.
        began = nil
      end
    end
    if began and began > before then
      return 0
    end
  end
  local counted = redis.call('PTTL', KEYS[3])
  keep = counted > 0 and now + counted - memory > before
end
local locked = redis.call('DEL', KEYS[1])
if not keep then
  redis.call('DEL', KEYS[3], KEYS[4])
end
if locked == 1 then
  redis.call('PEXPIRE', KEYS[2], memory)
end
return locked
