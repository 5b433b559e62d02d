-- Hold: puts a lock recorded elsewhere (a lock made in process while Redis
-- was down) into Redis, as lockout.lua would have left it. It only ever
-- lengthens a lock and raises a level, so holding twice changes nothing;
-- a level held lower than the identity's keeps the identity's, which then
-- lasts until memory after the held lock, as after any lock.
-- Like a lock that failures make, it starts the identity's failures anew:
-- those counted before it do not count towards the next lock. All three
-- keys share one hash tag.
--
-- KEYS[1]  lock: exists while the identity is locked; holds its own level
--          and, when known, when it began (see lockout.lua)
-- KEYS[2]  level: how many times the identity was locked recently
-- KEYS[3]  failures: consecutive failures since the last lock or success
-- ARGV[1]  level of the lock (integer >= 1)
-- ARGV[2]  time the lock has left, milliseconds (>= 1)
-- ARGV[3]  memory, milliseconds: how long the level outlives the lock
-- ARGV[4]  optional: when the lock began, milliseconds since the epoch (at
--          most Redis' now)
local level = tonumber(ARGV[1])
local left = tonumber(ARGV[2])
local memory = tonumber(ARGV[3])
local lock = level
if ARGV[4] then
  -- A start still to come by Redis' clock (given by a clock running
  -- ahead) is taken as now: it stands against the unlocks made before it,
  -- and not against those made after.
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  lock = level .. ':' .. math.min(tonumber(ARGV[4]), now)
end

local known = tonumber(redis.call('GET', KEYS[2])) or 0
-- The lock holds its own level and its start (clear.lua); the identity's
-- level, kept below, may be higher.
if redis.call('PTTL', KEYS[1]) < left then
  redis.call('SET', KEYS[1], lock, 'PX', left)
end
if known < level then
  redis.call('SET', KEYS[2], level, 'PX', left + memory)
elseif redis.call('PTTL', KEYS[2]) < left + memory then
  redis.call('PEXPIRE', KEYS[2], left + memory)
end
redis.call('DEL', KEYS[3])
return 1
