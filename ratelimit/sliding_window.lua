-- Sliding-window logs: decides one request against one or more rules, all
-- or none, in one atomic step. Each (rule, identity) has a log of the times,
-- in microseconds of Redis' own clock, of the requests admitted in its last
-- window, packed in a string:
--
--   byte 1      w, the width of each entry in bytes: 4, 5 or 6, the
--               fewest in which twice the window fits (wider only while
--               the log holds entries ahead of a clock that stepped back)
--   bytes 2-8   base, microseconds since the epoch, unsigned little-endian
--   bytes 9-14  the key's expiry as this script last set it, milliseconds
--               since the epoch, unsigned little-endian (0: not known)
--   then        one entry per admission, oldest first: its time less base,
--               unsigned little-endian in w bytes
--
-- Times only grow, so the live entries are the log's tail, found by binary
-- search, and the entries that left the window are cut off its front when
-- the log is next written (a log over 1 KB: once they are half of it, and
-- until then it is appended to). A rejection writes nothing.
--
-- A log lasts until its newest entry has left the window. Setting a key's
-- expiry costs Redis about twice as much as writing its value, so when the
-- expiry is moved it is moved an eighth of a window further than needed,
-- and noted in the header; the admissions of that eighth of a window then
-- write the value alone and keep the expiry. No key lasts more than an
-- eighth of its window longer than its entries.
--
-- KEYS     for each rule in turn: its log, then, for a lockable rule, its
--          identity's lock (see lockout.lua), which rejects while it
--          exists, whatever the log says. A lock-only rule has no log:
--          its lock alone. On a cluster every key shares one slot.
-- ARGV[1] the rules, 12 bytes each (i = 1..n, n = #ARGV[1] / 12), packed
--         rather than two arguments each, which cost Redis more to read:
--   limit   signed 32-bit little-endian: requests admitted per window
--           (>= 1), negated when the rule is lockable (its log's key is
--           then followed by its lock's); 0 for a lock-only rule, which
--           admits any number while its lock does not exist, and is
--           never written
--   window  signed 64-bit little-endian: microseconds (>= 1000, < 2^47);
--           0 for a lock-only rule
-- ARGV[2] (optional) places: attempts begun against lockable rules'
--         lockouts with the decision (Rule.Place; see inflight.lua, whose
--         verdict they share), 16 bytes each (j = 1..np):
--   rule      signed 32-bit little-endian: the index, from 1, of the
--             lockable rule whose identity's lockout the place counts
--             towards
--   threshold signed 32-bit little-endian: failures that lock (>= 1)
--   ttl       signed 64-bit little-endian: milliseconds the place counts
--             if never ended (>= 1)
-- ARGV[1 + 2j], ARGV[2 + 2j]  place j's token, unique, and its attempt's
--         digest ("" for one that always counts)
-- KEYS then ends with three keys for each place, in order: its identity's
--         failures, its attempts in flight and its recent failed
--         attempts (lockout.lua, inflight.lua), of its rule's hash tag.
-- Rules or places that do not fit these bounds, or that name more or
-- fewer keys than KEYS holds, are an error, and nothing is written.
--
-- Returns a string of 1 + 12n bytes, packed for the same reason: first a
-- byte, 1 if the request was admitted, in every rule, else 0; then for
-- each rule, in order:
--   count   signed 32-bit little-endian: requests in its window, this one
--           included only when the whole request was admitted; 0 for a
--           lock-only rule
--   value   signed 64-bit little-endian: when the request was admitted,
--           the time recorded in the rule's log (to take it back, see
--           take_back.lua), 0 for a lock-only rule. Else 0 if the rule
--           admits it, or the microseconds until the rule would admit one
--           more (the entry that must leave has left; never early, never
--           0), negated when it rejects because the identity is locked
--           (then the later of the time the lock has left and, if the
--           log is full, the time until it has room)
-- The request is admitted, in every rule, only if every rule admits it.
-- An admitted request then takes its places, all or none: none if the
-- attempts in flight refuse one of them, and it is admitted all the same
-- (its caller waits for the places, see inflight.lua). With places, 9
-- bytes follow for each: a byte, 1 if the place was taken, 2 if the
-- attempt goes ahead without one (its identity already failed with it),
-- 3 if the attempts in flight refuse it, else 0 (not taken: a rule
-- rejected, or another place was refused); then, signed 64-bit
-- little-endian, a refusal's wait in milliseconds until the oldest
-- attempt in flight stops counting (never 0), else 0.
--
-- Each call of this script is a decision, and what runs in every call is
-- what Redis pays for each: plain locals, few calls into Redis and into
-- struct, no table per log, no string built per entry; write, the larger
-- of its two functions, is made only once a request is admitted.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- Every key in one call: the logs, and the locks, whose time left is asked
-- only of those that exist.
local values = redis.call('MGET', unpack(KEYS))
local get, put = struct.unpack, struct.pack

-- The header's length: entry j (from 0) of a log w bytes wide begins at
-- HEAD + 1 + j * w.
local HEAD = 14

-- The index of the oldest of a log's m entries later than horizon, the
-- oldest being no later (so m > 0): the live entries are the log's tail.
local function live(raw, w, fmt, base, m, horizon)
  local lo, hi = 1, m
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if base + get(fmt, raw, HEAD + 1 + mid * w) > horizon then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end

-- Input Limiter never sends is an error, before anything is written (a
-- script's writes before an error stay). A window outside 1 ms .. 2^47 µs
-- (twice it must fit the widest entry) would admit without limit or be
-- stored truncated; keys not as the rules name them would skip a lock or
-- fail after other logs were written.
local BAD = 'ERR ratelimit: ARGV[1] is not packed rules for the keys given'
local MAXWINDOW = 2 ^ 47

local spec = ARGV[1]
local n = #spec / 12
if n < 1 or n % 1 ~= 0 then
  return redis.error_reply(BAD)
end

-- The verdicts, rule by rule: out[1] is the request's, 1 or 0, and each
-- rule's count and value (see above) go into out[2i] and out[2i+1]. The
-- last log read stays in raw, w, fmt, base, exp, m and first, from which a
-- single rule's admission writes without reading it again; oldest is its
-- oldest entry.
local out = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
local raw, w, fmt, base, exp, m, first, oldest
local k = 1
for i = 1, n do
  local limit, window = get('<i4i8', spec, 12 * i - 11)
  local lockable = limit <= 0
  local count, value = 0, 0
  if limit < 0 then
    limit = -limit
  end
  if limit ~= 0 then
    if window < 1000 or window >= MAXWINDOW then
      return redis.error_reply(BAD)
    end
    raw, w, fmt, base, exp, m, first, oldest = values[k], 0, '', 0, 0, 0, 0, 0
    if raw then
      -- The header and, at the common width of 4 bytes, the oldest
      -- entry in one read.
      local size = #raw
      if size >= HEAD + 4 then
        w, base, exp, oldest = get('<BI7I6I4', raw)
      elseif size >= HEAD then
        w, base, exp = get('<BI7I6', raw)
      end
      if w == 4 then
        fmt = '<I4'
      elseif w == 5 or w == 6 then
        fmt = w == 5 and '<I5' or '<I6'
        if size >= HEAD + w then
          oldest = get(fmt, raw, HEAD + 1)
        end
      end
      m = (size - HEAD) / w
      if fmt == '' or m % 1 ~= 0 then
        return redis.error_reply('ERR ratelimit: ' .. KEYS[k] .. ' is not a packed log')
      end
      -- The live entries are the log's tail: most often all of it (a
      -- flood at a full log, or a log written within its window), else
      -- found by binary search.
      local horizon = now - window
      if m > 0 and base + oldest <= horizon then
        first = live(raw, w, fmt, base, m, horizon)
      end
      count = m - first
    end
    k = k + 1
  end
  if lockable then
    -- Its lock, under the next key, rejects while it exists.
    if values[k] then
      local left = redis.call('PTTL', KEYS[k])
      if left > 0 then
        -- PTTL is whole milliseconds; one more keeps the answer from
        -- being early.
        value = -(left + 1) * 1000
      end
    end
    k = k + 1
  end
  if limit > 0 and count >= limit then
    -- For one slot to free, the count-limit+1 oldest live entries must
    -- leave; the youngest of them is live entry count-limit. An entry
    -- leaves once now >= its time + window: never early and, since the
    -- entry is live, never zero. In a log exactly full, none gone (a
    -- flood's), that entry is the oldest, read already.
    local j, entry = first + count - limit, oldest
    if j ~= 0 then
      entry = get(fmt, raw, HEAD + 1 + j * w)
    end
    local full = base + entry + window - now
    if value == 0 then
      value = full
    elseif full > -value then
      -- Locked, and full past the lock's end: a retry waits for both.
      value = -full
    end
  end
  if value ~= 0 then
    out[1] = 0
  end
  out[2 * i], out[2 * i + 1] = count, value
end
-- The places (ARGV[2]): each checked, as inflight.lua checks an attempt
-- begun, once every rule admits, and all taken only if none is refused.
-- Their keys follow the rules'. Without places none of this runs: what
-- every decision pays stays as it was.
local places = ARGV[2]
local np, pk = 0, #KEYS
if places then
  np = #places / 16
  if np < 1 or np % 1 ~= 0 or #ARGV ~= 2 + 2 * np then
    return redis.error_reply(BAD)
  end
  pk = #KEYS - 3 * np
end
if k - 1 ~= pk then
  return redis.error_reply(BAD)
end
-- With places: their verdicts, the answer with them (reply), and their
-- taking once the request is admitted (take).
local reply, take
if np > 0 then
  local status, wait = {}, {}
  local ms = math.floor(now / 1000)
  for j = 1, np do
    local i, threshold, ttl = get('<i4i4i8', places, 16 * j - 15)
    if i < 1 or i > n or get('<i4', spec, 12 * i - 11) > 0 or threshold < 1 or ttl < 1 then
      return redis.error_reply(BAD)
    end
    status[j], wait[j] = 0, 0
  end
  local refused = false
  for j = 1, np do
    if out[1] == 0 or refused then
      break
    end
    -- Its failures, its attempts in flight, its failed attempts.
    local f = pk + 3 * j - 2
    local digest = ARGV[2 + 2 * j]
    if digest ~= '' and redis.call('LPOS', KEYS[f + 2], digest) then
      status[j] = 2
    else
      redis.call('ZREMRANGEBYSCORE', KEYS[f + 1], '-inf', ms)
      local flying = redis.call('ZCARD', KEYS[f + 1])
      local threshold = get('<i4', places, 16 * j - 11)
      if flying > 0 and (tonumber(redis.call('GET', KEYS[f])) or 0) + flying >= threshold then
        local oldest = redis.call('ZRANGE', KEYS[f + 1], 0, 0, 'WITHSCORES')
        status[j], wait[j] = 3, math.max(tonumber(oldest[2]) - ms, 1)
        refused = true
      else
        status[j] = 1
      end
    end
  end
  reply = function()
    local parts = {put('<B' .. string.rep('i4i8', n), unpack(out, 1, 2 * n + 1))}
    for j = 1, np do
      if (out[1] == 0 or refused) and status[j] ~= 3 then
        status[j] = 0
      end
      parts[j + 1] = put('<Bi8', status[j], wait[j])
    end
    return table.concat(parts)
  end
  -- Each place taken stays in its identity's set of attempts in flight
  -- until it is ended or its ttl has passed.
  take = function()
    for j = 1, np do
      if status[j] == 1 and not refused then
        local f = pk + 3 * j - 2
        local ttl = get('<i8', places, 16 * j - 7)
        redis.call('ZADD', KEYS[f + 1], ms + ttl, ARGV[1 + 2 * j])
        -- The set lasts as long as its latest attempt counts (see
        -- inflight.lua).
        if redis.call('PTTL', KEYS[f + 1]) < ttl then
          redis.call('PEXPIRE', KEYS[f + 1], ttl)
        end
      end
    end
    return reply()
  end
end

if out[1] == 0 then
  if reply then
    return reply()
  end
  return put('<B' .. string.rep('i4i8', n), unpack(out, 1, 2 * n + 1))
end

-- Admitted. Writes the log of key: of its m entries (raw, w0 bytes each
-- from base, the key expiring at exp) those from keep on, then added
-- entries at time at; it lasts at least window past at.
local function write(key, raw, w0, fmt0, base, exp, m, keep, added, window, at)
  -- The width of the entries: the fewest bytes in which twice the window
  -- fits, so that a log rebased on its oldest live entry takes at least a
  -- window to outgrow its base again.
  local w = 6
  if window * 2 <= 4294967296 then
    w = 4
  elseif window * 2 <= 1099511627776 then
    w = 5
  end
  -- The key goes once its newest entry has left the window, not a
  -- microsecond before: an absolute time, rounded up to Redis'
  -- milliseconds (a relative one would count from a millisecond that may
  -- have begun before TIME was read).
  local fits = raw and w == w0 and at - base < 2 ^ (8 * w)
  if fits and exp >= math.ceil((at + window) / 1000) then
    -- The expiry already covers the new entries: the value alone.
    if keep < m - keep and #raw > 1024 then
      -- A long log (a generous limit, such as login_network's), most of
      -- it live: appended to, in time that does not grow with it, rather
      -- than copied whole. Its dead front is cut once it is half the
      -- log, so it holds at most twice what the window needs.
      redis.call('APPEND', key, string.rep(put(fmt0, at - base), added))
      return
    end
    local value, entry = nil, put(fmt0, at - base)
    if added > 1 then
      entry = string.rep(entry, added)
    end
    if keep == 0 then
      -- Every entry still live (a log written again within its
      -- window): the log as it is, and the new entries.
      value = raw .. entry
    elseif keep == m then
      value = put('<BI7I6', w, at, exp) .. string.rep(string.rep('\0', w), added)
    else
      value = string.sub(raw, 1, HEAD) .. string.sub(raw, HEAD + 1 + keep * w) .. entry
    end
    redis.call('SET', key, value, 'KEEPTTL')
    return
  end
  exp = math.ceil((at + window + window / 8) / 1000)
  local value
  if not raw or keep == m then
    -- Nothing live: a log of the new entries alone, based on them.
    value = put('<BI7I6', w, at, exp) .. string.rep(string.rep('\0', w), added)
  elseif fits then
    -- The common case: cut the entries that left, append the new.
    value = put('<BI7I6', w, base, exp) .. string.sub(raw, HEAD + 1 + keep * w) .. string.rep(put(fmt0, at - base), added)
  else
    -- Outgrown, or of another window: written anew, based on its oldest
    -- live entry. Entries span less than the width allows unless the
    -- clock stepped back by more than a window, leaving entries ahead of
    -- it: then wider entries, so that none wraps.
    local b = base + get(fmt0, raw, HEAD + 1 + keep * w0)
    while at - b >= 2 ^ (8 * w) and w < 6 do
      w = w + 1
    end
    if at - b >= 2 ^ 48 then
      -- Entries years ahead of the clock: not kept.
      b, keep = at, m
    end
    local fmt = w == 4 and '<I4' or (w == 5 and '<I5' or '<I6')
    local parts = {put('<BI7I6', w, b, exp)}
    for j = keep, m - 1 do
      parts[#parts + 1] = put(fmt, base + get(fmt0, raw, HEAD + 1 + j * w0) - b)
    end
    parts[#parts + 1] = string.rep(put(fmt, at - b), added)
    value = table.concat(parts)
  end
  -- The expiry as an integer's digits: Redis 7.0 writes a number given to
  -- redis.call with '%.17g', through the C library's floating-point
  -- printf: about 2% of Redis' time under a flood of admitted sign-ins.
  redis.call('SET', key, value, 'PXAT', string.format('%d', exp))
end

if n == 1 then
  if get('<i4', spec) == 0 then
    -- One lock-only rule, unlocked: nothing to write but its place.
    if take then
      return take()
    end
    return put('<Bi4i8', 1, 0, 0)
  end
  -- One rule (Allow, and every group of one on a cluster): its log, read
  -- once for the verdict, is written from what was read. Never before an
  -- entry already there, should Redis' clock step back: the log stays in
  -- order, and an entry that counts late only makes the limit stricter.
  local at = now
  if m > 0 then
    at = math.max(now, base + get(fmt, raw, HEAD + 1 + (m - 1) * w))
  end
  write(KEYS[1], raw, w, fmt, base, exp, m, first, 1, get('<i8', spec, 5), at)
  if take then
    out[2], out[3] = out[2] + 1, at
    return take()
  end
  return put('<Bi4i8', 1, out[2] + 1, at)
end

-- Several rules: where each rule's log is in KEYS (false for a lock-only
-- rule, which has none), walked again from the rules.
local logs = {}
k = 1
for i = 1, n do
  local limit = get('<i4', spec, 12 * i - 11)
  if limit ~= 0 then
    logs[i] = k
    k = k + 1
  else
    logs[i] = false
  end
  if limit <= 0 then
    k = k + 1
  end
end

-- Each log is written once, by the first of the rules naming it (a rule
-- given twice), with as many entries as rules name it, keeping what the
-- longest of their windows needs. Lock-only rules write nothing.
for i = 1, n do
  if logs[i] then
    local key, raw = KEYS[logs[i]], values[logs[i]]
    local added, window, seen = 1, get('<i8', spec, 12 * i - 7), false
    for j = 1, n do
      if j ~= i and logs[j] and KEYS[logs[j]] == key then
        if j < i then
          seen = true
          break
        end
        added = added + 1
        window = math.max(window, get('<i8', spec, 12 * j - 7))
      end
    end
    local w, fmt, base, exp, m = 0, '', 0, 0, 0
    if raw then
      w, base, exp = get('<BI7I6', raw)
      fmt = w == 4 and '<I4' or (w == 5 and '<I5' or '<I6')
      m = (#raw - HEAD) / w
    end
    -- Never before an entry already there (see above).
    local at = now
    if m > 0 then
      at = math.max(now, base + get(fmt, raw, HEAD + 1 + (m - 1) * w))
    end
    if not seen then
      local first = 0
      local horizon = now - window
      if m > 0 and base + get(fmt, raw, HEAD + 1) <= horizon then
        first = live(raw, w, fmt, base, m, horizon)
      end
      write(key, raw, w, fmt, base, exp, m, first, added, window, at)
    end
    out[2 * i] = out[2 * i] + 1
    out[2 * i + 1] = at
  end
end
if take then
  return take()
end
return put('<B' .. string.rep('i4i8', n), unpack(out, 1, 2 * n + 1))
