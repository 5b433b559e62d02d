-- Adds a batch's counts to one ranking, a sorted set of at most cap
-- members, by Space-Saving: a member new to a full ranking takes the
-- place of the lowest, with its count. A ranking that dropped its lowest
-- to stay within cap would drop a source that comes back in every batch
-- with a little, each time from nothing, however much it sums to: a flood
-- of one-off sources with a little more each would hide the heaviest.
-- Space-Saving keeps every member whose count is more than the ranking's
-- total over cap; a count is over the member's own by at most what it
-- inherited.
--
-- The batch's members already in the ranking are counted first. Then
-- its new members, the highest first, each take a place while there is
-- room, and past it the place of the lowest member at that moment,
-- which may be one of them: that can only be one of the ranking's
-- lowest before them, as many as there are new members past the room, or
-- one of them. So those are read in one command and the places decided
-- here, and Redis is sent a few commands for the whole batch, not one or
-- more a member: in a distributed attack every member of a batch is new.
--
-- KEYS[1]  the ranking
-- ARGV[1]  cap
-- ARGV[2]  the ranking's time to live, ms
-- ARGV[3..] the batch's members and their counts, member then count,
--          the highest first
local key = KEYS[1]
local cap = tonumber(ARGV[1])
local n = (#ARGV - 2) / 2

-- chunk bounds the arguments of one command, which unpack would refuse
-- past Lua's stack.
local chunk = 500
local function each_chunk(list, width, f)
  for i = 1, #list, chunk * width do
    f(unpack(list, i, math.min(i + chunk * width - 1, #list)))
  end
end

local names, counts = {}, {}
for i = 1, n do
  names[i], counts[i] = ARGV[1 + 2 * i], tonumber(ARGV[2 + 2 * i])
end
local scores = {}
for i = 1, n, chunk do
  local got = redis.call('ZMSCORE', key, unpack(names, i, math.min(i + chunk - 1, n)))
  for j, s in ipairs(got) do
    scores[i + j - 1] = s
  end
end

-- The members already in the ranking, counted.
local known, new = {}, {}
for i = 1, n do
  if scores[i] then
    known[#known + 1] = tonumber(scores[i]) + counts[i]
    known[#known + 1] = names[i]
  else
    new[#new + 1] = i
  end
end
each_chunk(known, 2, function(...) redis.call('ZADD', key, ...) end)

-- The new members given a place, a heap by (score, member), the lowest
-- first: its scores and members in two arrays, so that a batch of
-- thousands makes no table a member. Equal scores go by Lua's order of
-- the members, which Space-Saving's bounds do not depend on.
local hs, hm = {}, {}
local function below(i, j)
  return hs[i] < hs[j] or hs[i] == hs[j] and hm[i] < hm[j]
end
local function swap(i, j)
  hs[i], hs[j], hm[i], hm[j] = hs[j], hs[i], hm[j], hm[i]
end
local function push(score, member)
  local i = #hs + 1
  hs[i], hm[i] = score, member
  while i > 1 do
    local up = (i - i % 2) / 2
    if not below(i, up) then
      break
    end
    swap(i, up)
    i = up
  end
end
local function pop()
  local score, last = hs[1], #hs
  hs[1], hm[1] = hs[last], hm[last]
  hs[last], hm[last] = nil, nil
  local i = 1
  while true do
    local l, m = 2 * i, i
    if l < last and below(l, m) then m = l end
    if l + 1 < last and below(l + 1, m) then m = l + 1 end
    if m == i then
      break
    end
    swap(i, m)
    i = m
  end
  return score
end

local room = cap - redis.call('ZCARD', key)
local taken = math.max(0, #new - math.max(room, 0))
local low = {}
if taken > 0 then
  low = redis.call('ZRANGE', key, 0, taken - 1, 'WITHSCORES')
end
-- low holds the ranking's lowest, member then score; next is the next of
-- them a new member may take the place of.
local next, gone = 1, {}
for _, i in ipairs(new) do
  local score = counts[i]
  if room > 0 then
    room = room - 1
  else
    local old = low[next]
    local oldscore = old and tonumber(low[next + 1])
    if old and (hs[1] == nil or oldscore < hs[1] or oldscore == hs[1] and old < hm[1]) then
      gone[#gone + 1] = old
      next = next + 2
      score = score + oldscore
    elseif hs[1] then
      score = score + pop()
    end
  end
  push(score, names[i])
end
each_chunk(gone, 1, function(...) redis.call('ZREM', key, ...) end)
local placed = {}
for i = 1, #hs do
  placed[2 * i - 1], placed[2 * i] = hs[i], hm[i]
end
each_chunk(placed, 2, function(...) redis.call('ZADD', key, ...) end)
redis.call('PEXPIRE', key, ARGV[2])
return #hs
