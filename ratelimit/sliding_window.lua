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
-- the log is next written (a log over 1 KB: once they are half of it, and
-- until then it is appended to). A rejection writes nothing.
--
-- KEYS     for each rule in turn: its log, then, for a lockable rule, its
--          identity's lock (see lockout.lua), which rejects while it
--          exists, whatever the log says. A lock-only rule has no log:
--          its lock alone. On a cluster every key shares one slot.
-- ARGV     two per rule (i = 1..n, n = #ARGV / 2):
--   ARGV[2i-1]  its limit, requests admitted per window (>= 1), negated
--               when the rule is lockable (its log's key is then followed
--               by its lock's); 0 for a lock-only rule, which admits any
--               number while its lock does not exist, and is never
--               written
--   ARGV[2i]    its window in microseconds (>= 1000); 0 for a lock-only
--               rule
--
-- Returns 1 + 2n integers: first 1 if the request was admitted, in every
-- rule, else 0; then for each rule, in order:
--   count   requests in its window, this one included only when the whole
--           request was admitted; 0 for a lock-only rule
--   value   when the request was admitted: the time recorded in the
--           rule's log (to take it back, see take_back.lua), 0 for a
--           lock-only rule. Else 0 if
--           the rule admits it, or the microseconds until the rule would
--           admit one more (the entry that must leave has left; never
--           early, never 0), negated when it rejects because the identity
--           is locked (the time the lock has left)
-- The request is admitted, in every rule, only if every rule admits it.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- Every key in one call: the logs, and the locks, whose time left is asked
-- only of those that exist.
local values = redis.call('MGET', unpack(KEYS))
local get, put = struct.unpack, struct.pack

-- Each call of this script is a decision: what runs in every call is kept
-- to plain locals, without a table per log or a string built per entry.

-- The format of an entry w bytes wide.
local function format(w)
  if w == 4 then
    return '<I4'
  elseif w == 5 then
    return '<I5'
  end
  return '<I6'
end

-- The width, format, base and number of entries of a packed log, or
-- nothing if raw is none.
local function header(raw)
  local w = string.byte(raw, 1)
  if (w ~= 4 and w ~= 5 and w ~= 6) or #raw < 8 or (#raw - 8) % w ~= 0 then
    return nil
  end
  return w, format(w), get('<I7', raw, 2), (#raw - 8) / w
end

-- The index of the oldest of a log's m entries later than horizon (m if
-- none).
local function live(raw, w, fmt, base, m, horizon)
  -- Most often none has left: a flood at a full log, or a log written
  -- within its window.
  if m == 0 or base + get(fmt, raw, 9) > horizon then
    return 0
  end
  local lo, hi = 1, m
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if base + get(fmt, raw, 9 + mid * w) > horizon then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end

-- Writes the log of key: of its m entries (raw, w bytes each from base)
-- those from keep on, then added entries at time at; it lasts window past
-- at.
local function write(key, raw, w0, fmt0, base, m, keep, added, window, at)
  -- The width of the entries: the fewest bytes in which twice the window
  -- fits, so that a log rebased on its oldest live entry takes at least a
  -- window to outgrow its base again.
  local w = 6
  if window * 2 <= 4294967296 then
    w = 4
  elseif window * 2 <= 1099511627776 then
    w = 5
  end
  local expiry = math.ceil((at + window) / 1000)
  local value
  if keep < m - keep and #raw > 1024 and w == w0 and at - base < 2 ^ (8 * w) then
    -- A long log (a generous limit, such as login_password's), most of it
    -- live: appended to, in time that does not grow with it, rather than
    -- copied whole. Its dead front is cut once it is half the log, so it
    -- holds at most twice what the window needs.
    redis.call('APPEND', key, string.rep(put(fmt0, at - base), added))
    redis.call('PEXPIREAT', key, expiry)
    return
  elseif keep == m then
    -- Nothing live: a log of the new entries alone, based on them.
    value = put('<BI7', w, at) .. string.rep(string.rep('\0', w), added)
  elseif w == w0 and at - base < 2 ^ (8 * w) then
    -- The common case: cut the entries that left, append the new.
    value = string.sub(raw, 1, 8) .. string.sub(raw, 9 + keep * w) .. string.rep(put(fmt0, at - base), added)
  else
    -- Outgrown, or of another window: write it anew, based on its oldest
    -- live entry. Entries span less than the width allows unless the
    -- clock stepped back by more than a window, leaving entries ahead of
    -- it: then wider entries, so that none wraps.
    local b = base + get(fmt0, raw, 9 + keep * w0)
    while at - b >= 2 ^ (8 * w) and w < 6 do
      w = w + 1
    end
    if at - b >= 2 ^ 48 then
      -- Entries years ahead of the clock: not kept.
      b, keep = at, m
    end
    local fmt = format(w)
    local parts = {put('<BI7', w, b)}
    for j = keep, m - 1 do
      parts[#parts + 1] = put(fmt, base + get(fmt0, raw, 9 + j * w0) - b)
    end
    parts[#parts + 1] = string.rep(put(fmt, at - b), added)
    value = table.concat(parts)
  end
  -- The key goes once its newest entry has left the window, not a
  -- microsecond before: an absolute time, rounded up to Redis'
  -- milliseconds (a relative one would count from a millisecond that may
  -- have begun before TIME was read).
  redis.call('SET', key, value, 'PXAT', expiry)
end

-- The time left, in microseconds, of the lock under KEYS[k], if it exists
-- (values[k]); 0 if none.
local function locked(k)
  if values[k] then
    local left = redis.call('PTTL', KEYS[k])
    if left > 0 then
      -- PTTL is whole milliseconds; one more keeps the answer from being early.
      return (left + 1) * 1000
    end
  end
  return 0
end

local function malformed(k)
  return redis.error_reply('ERR ratelimit: ' .. KEYS[k] .. ' is not a packed log')
end

local n = #ARGV / 2

if n == 1 and ARGV[1] == '0' then
  -- One lock-only rule: its lock alone decides, and nothing is written.
  local left = locked(1)
  if left ~= 0 then
    return {0, 0, -left}
  end
  return {1, 0, 0}
end

if n == 1 then
  -- One rule (Allow, and every group of one on a cluster): the log is
  -- read once for both the verdict and the write.
  local limit, window = tonumber(ARGV[1]), tonumber(ARGV[2])
  local raw = values[1]
  local w, fmt, base, m, first = 0, '', 0, 0, 0
  if raw then
    w, fmt, base, m = header(raw)
    if not w then
      return malformed(1)
    end
    first = live(raw, w, fmt, base, m, now - window)
  end
  local count, value = m - first, 0
  if limit < 0 then
    limit = -limit
    value = -locked(2)
  end
  if value == 0 and count >= limit then
    -- For one slot to free, the count-limit+1 oldest live entries must
    -- leave; the youngest of them is live entry count-limit. An entry
    -- leaves once now >= its time + window: never early and, since the
    -- entry is live, never zero.
    value = base + get(fmt, raw, 9 + (first + count - limit) * w) + window - now
  end
  if value ~= 0 then
    return {0, count, value}
  end
  -- Never before an entry already there, should Redis' clock step back:
  -- the log stays in order, and an entry that counts late only makes the
  -- limit stricter.
  local at = now
  if m > 0 then
    at = math.max(now, base + get(fmt, raw, 9 + (m - 1) * w))
  end
  write(KEYS[1], raw, w, fmt, base, m, first, 1, window, at)
  return {1, count + 1, at}
end

-- Several rules. First the verdict of each, into the reply; the only
-- other table holds where each rule's log is in KEYS (false for a
-- lock-only rule, which has none).
local out, logs = {1}, {}
local k = 1
for i = 1, n do
  local limit, window = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local count, value = 0, 0
  if limit == 0 then
    -- Lock-only: its lock alone, and no log.
    logs[i] = false
    value = -locked(k)
    k = k + 1
  else
    local raw = values[k]
    local w, fmt, base, first = 0, '', 0, 0
    if raw then
      local m
      w, fmt, base, m = header(raw)
      if not w then
        return malformed(k)
      end
      first = live(raw, w, fmt, base, m, now - window)
      count = m - first
    end
    logs[i] = k
    k = k + 1
    if limit < 0 then
      limit = -limit
      value = -locked(k)
      k = k + 1
    end
    if value == 0 and count >= limit then
      -- As for one rule, above.
      value = base + get(fmt, raw, 9 + (first + count - limit) * w) + window - now
    end
  end
  if value ~= 0 then
    out[1] = 0
  end
  out[2 * i], out[2 * i + 1] = count, value
end
if out[1] == 0 then
  return out
end

-- Admitted: each log is written once, by the first of the rules naming it
-- (a rule given twice), with as many entries as rules name it, keeping
-- what the longest of their windows needs. Lock-only rules write nothing.
for i = 1, n do
  if logs[i] then
    local key, raw = KEYS[logs[i]], values[logs[i]]
    local added, window, seen = 1, tonumber(ARGV[2 * i]), false
    for j = 1, n do
      if j ~= i and logs[j] and KEYS[logs[j]] == key then
        if j < i then
          seen = true
          break
        end
        added = added + 1
        window = math.max(window, tonumber(ARGV[2 * j]))
      end
    end
    local w, fmt, base, m = 0, '', 0, 0
    if raw then
      w, fmt, base, m = header(raw)
    end
    -- Never before an entry already there (see above).
    local at = now
    if m > 0 then
      at = math.max(now, base + get(fmt, raw, 9 + (m - 1) * w))
    end
    if not seen then
      local first = 0
      if raw then
        first = live(raw, w, fmt, base, m, now - window)
      end
      write(key, raw, w, fmt, base, m, first, added, window, at)
    end
    out[2 * i] = out[2 * i] + 1
    out[2 * i + 1] = at
  end
end
return out
