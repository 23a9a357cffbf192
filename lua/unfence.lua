-- unfence.lua: lifts a rebuild's fence if it is still this rebuild's, so a
-- failed rebuild does not hold the voucher until the fence lapses.
--
-- KEYS[1] -> seckill:window:{shard}:voucherId   hash: fence (the rebuild's
--            token), fenceUntil (see fence_voucher.lua)
--
-- ARGV[1] -> the rebuild's fence token
--
-- Returns 1 if lifted, 0 if the fence was not this rebuild's. A freeze
-- this rebuild holds (freeze_bucket.lua) is lifted the same way.

local held = redis.call('HMGET', KEYS[1], 'fence', 'freeze')
if held[1] == ARGV[1] then
  return redis.call('HDEL', KEYS[1], 'fence', 'fenceUntil')
end
if held[2] == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'freeze', 'freezeUntil')
  return 1
end
return 0
