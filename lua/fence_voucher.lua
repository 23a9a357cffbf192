-- fence_voucher.lua: a rebuild takes the voucher's fence and removes its
-- stock in one step, so from then on no reservation of the voucher runs
-- (seckill.lua answers "not loaded") until restore_voucher.lua. The fence
-- expires on its own should the rebuild die.
--
-- KEYS[1] -> seckill:fence:{shard}:voucherId   string: the rebuild's token
-- KEYS[2] -> seckill:stock:{shard}:voucherId   string: remaining stock
--
-- ARGV[1] -> the rebuild's token
-- ARGV[2] -> the fence's time to live, in milliseconds
--
-- Returns 1 when fenced, 0 when another rebuild holds the fence.

if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
redis.call('DEL', KEYS[2])
return 1
