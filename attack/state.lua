-- Attack mode's state, entered and left by one script so that exactly one
-- replica sees each change and records it.
--
-- KEYS[1]  the state hash: active ("1" or "0"), since (unix ms), trigger
--          ("automatic" or "admin"), by (who switched it, "" for the
--          detector), last_hit (unix ms of the last trip), suppress_until
--          (unix ms: no automatic entry before it, after an admin's "off")
-- ARGV[1]  op: "hit" (a replica's window tripped), "tick" (leave after the
--          quiet period), "on" or "off" (an administrator's switch)
-- ARGV[2]  now, unix ms
-- ARGV[3]  quiet period, ms
-- ARGV[4]  by: who switches ("" for hit and tick)
-- ARGV[5]  time to live of the state, ms, renewed on every call
-- ARGV[6..11]  the state as the calling replica last read it: active,
--          since, trigger, by, last_hit, suppress_until; put back when
--          the hash is gone while it was active or held off (a Redis
--          restarted without its data), so that the restart neither
--          ends an administrator's "on" nor lifts an "off", nor has an
--          attack that goes on start again
-- ARGV[12] the call's name: a replica whose call went unanswered (a
--          timeout, a failover) calls again under the same name, and is
--          told the change its first call made, if that one ran; else ""
--
-- The hash also keeps change_token and change, the name of the call that
-- made the latest change and that change, so that a call sent again is
-- told "started" or "ended" as the first would have been: otherwise the
-- one replica that made the change would never hear of it, and nobody
-- would record it or sign out the browsers that came just before. It
-- also keeps end_token, end_since, end_trigger and end_by, the name of
-- the call that made the latest end and the attack it ended: another
-- replica's trip may start attack mode again before the call that ended
-- it is sent again, and that call is still told of its end.
--
-- Returns {change, active, since, trigger, by, suppress_until, last_hit,
-- end_since, end_trigger, end_by}: change is "started", "ended" or ""
-- (nothing changed); the rest is the state after the call (for "ended",
-- since, trigger and by of the attack that ended), and the attack the
-- latest end ended.
local key = KEYS[1]
local op = ARGV[1]
local now = tonumber(ARGV[2])
local quiet = tonumber(ARGV[3])
local by = ARGV[4]
local ttl = tonumber(ARGV[5])

local token = ARGV[12] or ''

local f = redis.call('HMGET', key, 'active', 'since', 'trigger', 'by', 'last_hit', 'suppress_until', 'change_token', 'change',
  'end_token', 'end_since', 'end_trigger', 'end_by')
local restored = false
if redis.call('EXISTS', key) == 0 and (ARGV[6] == '1' or (tonumber(ARGV[11]) or 0) > now) then
  f = {ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11]}
  restored = true
end
local active = f[1] == '1'
local since = tonumber(f[2]) or 0
local trigger = f[3] or ''
local who = f[4] or ''
local last_hit = tonumber(f[5]) or 0
local suppress = tonumber(f[6]) or 0
local change_token = f[7] or ''
local last_change = f[8] or ''
local end_token = f[9] or ''
local end_since = tonumber(f[10]) or 0
local end_trigger = f[11] or ''
local end_by = f[12] or ''
local change = ''

if op == 'hit' then
  if now >= suppress then
    -- The latest trip, whatever a lagging replica's clock says.
    last_hit = math.max(last_hit, now)
    if not active then
      active, since, trigger, who, change = true, now, 'automatic', '', 'started'
    end
  end
elseif op == 'tick' then
  if active and trigger == 'automatic' and now - last_hit >= quiet then
    active, change = false, 'ended'
  end
elseif op == 'on' then
  suppress = 0
  if active then
    -- An attack the detector found becomes the administrator's: it stays
    -- on until an administrator turns it off.
    trigger, who = 'admin', by
  else
    active, since, trigger, who, change = true, now, 'admin', by, 'started'
  end
  last_hit = now
elseif op == 'off' then
  suppress = now + quiet
  if active then
    active, change, who = false, 'ended', by
  end
else
  return redis.error_reply('unknown op ' .. op)
end

if change ~= '' then
  change_token, last_change = token, change
  if change == 'ended' then
    end_token, end_since, end_trigger, end_by = token, since, trigger, who
  end
elseif token ~= '' and token == change_token and (last_change == 'started') == active then
  -- This call was sent before and made the latest change, which still
  -- holds; its answer was lost.
  change = last_change
elseif token ~= '' and token == end_token then
  -- This call was sent before and ended attack mode, which another
  -- call has since started again; its answer was lost.
  change = 'ended'
end

if op ~= 'tick' or change ~= '' or active or restored or redis.call('EXISTS', key) == 1 then
  redis.call('HSET', key, 'active', active and '1' or '0', 'since', since, 'trigger', trigger, 'by', who,
    'last_hit', last_hit, 'suppress_until', suppress, 'change_token', change_token, 'change', last_change,
    'end_token', end_token, 'end_since', end_since, 'end_trigger', end_trigger, 'end_by', end_by)
  redis.call('PEXPIRE', key, ttl)
end
return {change, active and '1' or '0', tostring(since), trigger, who, tostring(suppress), tostring(last_hit),
  tostring(end_since), end_trigger, end_by}
