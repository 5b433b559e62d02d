local key    = KEYS[1]
local now    = tonumber(ARGV[1])
local window = tonumber(ARGV[2])  -- milliseconds
local limit  = tonumber(ARGV[3])

-- Expire old entries
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)

-- Count current window
local count = redis.call('ZCARD', key)

-- Reject if at limit
if count >= limit then
  return 0
end

-- Admit and record (unique member to handle same-millisecond requests)
redis.call('ZADD', key, now, now .. '-' .. redis.call('INCR', key .. ':seq'))
redis.call('EXPIRE', key, math.ceil(window / 1000) + 1)
return 1
