-- Clear: ends an identity's lock, if any, and forgets its failures and the
-- attempts they were (a successful sign-in, an administrator's unlock).
-- The level is kept, to escalate a lock soon after, and remembered as
-- after a lock that runs out: for the memory after the lock's end, which
-- an unlock makes now. All four keys share one hash tag.
--
-- KEYS[1]  lock: exists while the identity is locked (see lockout.lua)
-- KEYS[2]  level: how many times the identity was locked recently
-- KEYS[3]  failures
-- KEYS[4]  attempts
-- ARGV[1]  memory, milliseconds: how long the level outlives the lock
--
-- Returns 1 if the identity was locked, else 0.
local locked = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[3], KEYS[4])
if locked == 1 then
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
end
return locked
