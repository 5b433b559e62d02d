-- Take back: removes one admission from a packed log (see sliding_window.lua
-- for the format), that of a request another rule then rejected. Only a
-- decision whose rules live in different slots of a Redis Cluster, and so
-- could not be decided in one script, needs it.
--
-- KEYS[1]  the log
-- ARGV[1]  the time the admission recorded (sliding_window.lua's "at")
--
-- Entries with one time are alike, so the newest of them goes. If none is
-- left (the log expired or was reset meanwhile) nothing changes. Returns 1
-- if an entry was removed, else 0.
local raw = redis.call('GET', KEYS[1])
if not raw then
  return 0
end
-- The header (14 bytes) is kept as it is: the key keeps its expiry, which
-- the header records.
local w = struct.unpack('<B', raw)
local fmt = '<I' .. w
local offset = tonumber(ARGV[1]) - struct.unpack('<I7', raw, 2)
for i = (#raw - 14) / w - 1, 0, -1 do
  local e = struct.unpack(fmt, raw, 15 + i * w)
  if e == offset then
    local rest = string.sub(raw, 1, 14 + i * w) .. string.sub(raw, 15 + (i + 1) * w)
    if #rest == 14 then
      redis.call('DEL', KEYS[1])
    else
      redis.call('SET', KEYS[1], rest, 'KEEPTTL')
    end
    return 1
  elseif e < offset then
    return 0
  end
end
return 0
