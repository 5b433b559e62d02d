-- Sliding-window logs: decides one request against one or more rules, all
-- or none, in one atomic step. Each (rule, identity) has a log of the times,
-- in microseconds of Redis' own clock, of the requests admitted in its last
-- window, packed in a string:
--
--   byte 1      w, the width of each entry in bytes: 4, 5 or 6, the
--               fewest in which twice the window fits (wider only while
--               the log holds entries ahead of a clock that stepped back)
--   bytes 2-8   base, microseconds since the epoch, unsigned little-endian
--   then        one entry per admission, oldest first: its time less base,
--               unsigned little-endian in w bytes
--
-- Times only grow, so the live entries are the log's tail, found by binary
-- search, and the entries that left the window are cut off its front when
-- the log is next written. A rejection writes nothing.
--
-- KEYS     for each rule in turn: its log, then, for a lockable rule, its
--          identity's lock (see lockout.lua), which rejects while it
--          exists, whatever the log says. On a cluster every key shares
--          one slot.
-- ARGV[1]  n, the number of rules
-- ARGV[3i-1], ARGV[3i], ARGV[3i+1]  for rule i (1..n): its limit (requests
--          admitted per window, >= 1), its window in microseconds (>= 1000)
--          and 1 if it is lockable, else 0
--
-- Returns five integers per rule, in order:
--   allowed      1 if the rule admits the request, else 0
--   count        requests in its window, this one included only when the
--                whole request was admitted
--   retry_after  when the rule rejects, microseconds until it would admit
--                one more (the entry that must leave has left, or the lock
--                has ended); never early, never 0; else 0
--   locked       1 if it rejects because the identity is locked, else 0
--   at           when the request was admitted, the time recorded in the
--                rule's log (to take it back, see take_back.lua); else 0
-- The request is admitted, in every rule, only if every rule admits it.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- Every key in one call: the logs, and the locks, whose time left is asked
-- only of those that exist.
local values = redis.call('MGET', unpack(KEYS))
local logs = {} -- by key, each parsed once

local function open(k)
  local key = KEYS[k]
  local log = logs[key]
  if log then
    return log
  end
  local raw = values[k]
  -- Every field in the constructor: one allocation, no rehash.
  log = {key = key, n = 0, added = 0, window = 0, raw = false, w = 0, fmt = false, base = 0, keep = false, at = false}
  if raw then
    local w = string.byte(raw, 1)
    if (w ~= 4 and w ~= 5 and w ~= 6) or #raw < 8 or (#raw - 8) % w ~= 0 then
      return nil
    end
    log.raw, log.w, log.fmt = raw, w, '<I' .. w
    log.base = struct.unpack('<I7', raw, 2)
    log.n = (#raw - 8) / w
  end
  logs[key] = log
  return log
end

-- The time of entry i (0 for the oldest).
local function at(log, i)
  return log.base + struct.unpack(log.fmt, log.raw, 9 + i * log.w)
end

-- The index of the oldest entry later than horizon (log.n if none).
local function live(log, horizon)
  -- Most often none has left: a flood at a full log, or a log written
  -- within its window.
  if log.n == 0 or at(log, 0) > horizon then
    return 0
  end
  local lo, hi = 1, log.n
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if at(log, mid) > horizon then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end

local n = tonumber(ARGV[1])
local rules = {}
local admit = true
local k = 1
for i = 1, n do
  local limit, window = tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i])
  local log = open(k)
  if not log then
    return redis.error_reply('ERR ratelimit: ' .. KEYS[k] .. ' is not a packed log')
  end
  k = k + 1
  local first = live(log, now - window)
  local r = {log = log, first = first, window = window, count = log.n - first, retry = 0, locked = 0}
  if ARGV[3 * i + 1] == '1' then
    if values[k] then
      local left = redis.call('PTTL', KEYS[k])
      if left > 0 then
        -- PTTL is whole milliseconds; one more keeps the answer from being early.
        r.retry, r.locked = (left + 1) * 1000, 1
      end
    end
    k = k + 1
  end
  if r.locked == 0 and r.count >= limit then
    -- For one slot to free, the count-limit+1 oldest live entries must
    -- leave; the youngest of them is live entry count-limit. An entry
    -- leaves once now >= its time + window: never early and, since the
    -- entry is live, never zero.
    r.retry = at(log, first + r.count - limit) + window - now
  end
  if r.retry > 0 then
    admit = false
  end
  rules[i] = r
end

if admit then
  -- A log named by several rules keeps what the longest window needs.
  for _, r in ipairs(rules) do
    local log = r.log
    log.added = log.added + 1
    log.keep = math.min(log.keep or r.first, r.first)
    log.window = math.max(log.window, r.window)
  end
  for _, r in ipairs(rules) do
    local log = r.log
    if not log.at then
      -- Never before an entry already there, should Redis' clock step
      -- back: the log stays in order, and an entry that counts late only
      -- makes the limit stricter.
      log.at = now
      if log.n > 0 then
        log.at = math.max(now, at(log, log.n - 1))
      end
      -- The width of the entries: the fewest bytes in which twice the
      -- window fits, so that a log rebased on its oldest live entry takes
      -- at least a window to outgrow its base again.
      local w = 6
      if log.window * 2 <= 4294967296 then
        w = 4
      elseif log.window * 2 <= 1099511627776 then
        w = 5
      end
      local value
      if log.keep == log.n then
        -- Nothing live: a log of the new entries alone, based on them.
        value = struct.pack('<BI7', w, log.at) .. string.rep(string.rep('\0', w), log.added)
      elseif w == log.w and log.at - log.base < 2 ^ (8 * w) then
        -- The common case: cut the entries that left, append the new.
        value = string.sub(log.raw, 1, 8) .. string.sub(log.raw, 9 + log.keep * w)
          .. string.rep(struct.pack(log.fmt, log.at - log.base), log.added)
      else
        -- Outgrown, or of another window: write it anew, based on its
        -- oldest live entry. Entries span less than the width allows
        -- unless the clock stepped back by more than a window, leaving
        -- entries ahead of it: then wider entries, so that none wraps.
        local base = at(log, log.keep)
        local span = log.at - base
        while span >= 2 ^ (8 * w) and w < 6 do
          w = w + 1
        end
        if span >= 2 ^ 48 then
          -- Entries years ahead of the clock: not kept.
          base, log.keep = log.at, log.n
        end
        local fmt = '<I' .. w
        local parts = {struct.pack('<BI7', w, base)}
        for j = log.keep, log.n - 1 do
          parts[#parts + 1] = struct.pack(fmt, at(log, j) - base)
        end
        parts[#parts + 1] = string.rep(struct.pack(fmt, log.at - base), log.added)
        value = table.concat(parts)
      end
      -- The key goes once its newest entry has left the window, not a
      -- microsecond before: an absolute time, rounded up to Redis'
      -- milliseconds (a relative one would count from a millisecond that
      -- may have begun before TIME was read).
      redis.call('SET', log.key, value, 'PXAT', math.ceil((log.at + log.window) / 1000))
    end
  end
end

local out = {}
for i, r in ipairs(rules) do
  local count, at = r.count, 0
  if admit then
    count, at = count + 1, r.log.at
  end
  local allowed = 0
  if r.retry == 0 then
    allowed = 1
  end
  if n == 1 then
    return {allowed, count, r.retry, r.locked, at}
  end
  out[5 * i - 4], out[5 * i - 3], out[5 * i - 2], out[5 * i - 1], out[5 * i] = allowed, count, r.retry, r.locked, at
end
return out
