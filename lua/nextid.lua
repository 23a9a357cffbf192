-- nextid.lua: take a block of the ID worker's per-day counter.
--
-- KEYS[1] -> seckill:id:{yyyymmdd}   string: the day's counter (UTC day)
--
-- ARGV[1] -> block size (how many ids to take)
-- ARGV[2] -> time to live of the counter, in seconds
-- ARGV[3] -> floor (optional): the counter first rises to at least this,
--            after Redis forgot it or went back to an old snapshot
--
-- Returns the counter's new value: the block is (value - size, value].

local floor = tonumber(ARGV[3] or '0')
if floor > 0 and tonumber(redis.call('GET', KEYS[1]) or '0') < floor then
  redis.call('SET', KEYS[1], floor)
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if v == tonumber(ARGV[1]) then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return v
