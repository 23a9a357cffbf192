-- unfence.lua: lifts a rebuild's fence if it is still this rebuild's, so a
-- failed rebuild does not hold the voucher until the fence expires.
--
-- KEYS[1] -> seckill:fence:{shard}:voucherId   string: the rebuild's token
--
-- ARGV[1] -> the rebuild's fence token
--
-- Returns 1 if lifted, 0 if the fence was not this rebuild's.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
