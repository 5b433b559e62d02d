-- Adds what one replica counted to the buckets every replica shares, each
-- batch once: a batch sent again, by the Watch after a flush that failed
-- or by a client that lost an answer, adds nothing it added before,
-- whatever order the sends reach Redis in.
--
-- KEYS[1]   the replica's marker: the number of the newest batch applied
-- KEYS[2..] the keys the writes name
-- ARGV[1]   the marker's time to live, ms
-- ARGV[2]   the number of the newest batch sent
-- ARGV[3..] the batches, oldest first, numbers increasing: each its number,
--           how many values its writes take, and its writes, each an op,
--           the key's index in KEYS and the op's values:
--             h key field n      HINCRBY key field n
--             s key cap member n member's count in a ranking of at
--                                most cap (Space-Saving: a member new
--                                to a full ranking takes the place of
--                                the lowest, and its count plus n)
--             e key ms           PEXPIRE key ms
--
-- The distinct accounts and networks (HyperLogLogs) are not among the
-- writes: they may be hundreds of thousands under a flood, which one
-- script would add while Redis answers no one else. The Watch adds them
-- with PFADD commands of their own, which add nothing when sent again.
--
-- A batch whose number is not above the marker's was applied by an
-- earlier send and is skipped. The marker moves first, so a write that
-- fails half-way (a key of the wrong type) leaves the rest of its batch
-- unwritten rather than written twice. Returns the number of batches
-- applied.
local marker = KEYS[1]
local last = tonumber(redis.call('GET', marker)) or 0
if tonumber(ARGV[2]) > last then
  redis.call('SET', marker, ARGV[2], 'PX', ARGV[1])
else
  redis.call('PEXPIRE', marker, ARGV[1])
end

local applied = 0
local i = 3
while i <= #ARGV do
  local stop = i + 1 + tonumber(ARGV[i + 1])
  if tonumber(ARGV[i]) > last then
    applied = applied + 1
    local j = i + 2
    while j <= stop do
      local op, key = ARGV[j], KEYS[tonumber(ARGV[j + 1])]
      if op == 'h' then
        redis.call('HINCRBY', key, ARGV[j + 2], ARGV[j + 3])
        j = j + 4
      elseif op == 's' then
        -- A ranking that dropped its lowest to stay within cap would
        -- drop a network that comes back every second with a little,
        -- each time from nothing, whatever its sum: the heaviest may
        -- be one that never fails much at once. Space-Saving keeps any
        -- member whose count is more than the ranking's total over cap;
        -- a count is over the member's own by at most what it inherited.
        local cap, member, n = tonumber(ARGV[j + 2]), ARGV[j + 3], tonumber(ARGV[j + 4])
        if not redis.call('ZSCORE', key, member) and redis.call('ZCARD', key) >= cap then
          local lowest = redis.call('ZPOPMIN', key)
          n = n + tonumber(lowest[2])
        end
        redis.call('ZINCRBY', key, n, member)
        j = j + 5
      elseif op == 'e' then
        redis.call('PEXPIRE', key, ARGV[j + 2])
        j = j + 3
      else
        return redis.error_reply('flush.lua: unknown write ' .. tostring(op))
      end
    end
  end
  i = stop + 1
end
return applied
