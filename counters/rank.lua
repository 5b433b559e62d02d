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
-- KEYS[1]  the ranking
-- ARGV[1]  cap
-- ARGV[2]  the ranking's time to live, ms
-- ARGV[3..] the batch's members and their counts, member then count,
--          the highest first: those enter a ranking with room first,
--          with their own counts
local key = KEYS[1]
local cap = tonumber(ARGV[1])
local card = redis.call('ZCARD', key)
for i = 3, #ARGV, 2 do
  local member, n = ARGV[i], tonumber(ARGV[i + 1])
  if not redis.call('ZSCORE', key, member) then
    if card >= cap then
      local lowest = redis.call('ZPOPMIN', key)
      n = n + tonumber(lowest[2])
    else
      card = card + 1
    end
  end
  redis.call('ZINCRBY', key, n, member)
end
redis.call('PEXPIRE', key, ARGV[2])
return card
