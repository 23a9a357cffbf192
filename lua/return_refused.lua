-- return_refused.lua: gives back, once, the unit of an order the database
-- refused because its buyer already holds another order of the voucher
-- (buyer_holds_another: the buyers' hash was lost, and the shopper's second
-- reservation went through). The database never took stock for it; the
-- live stock did. The buyer's mark then names the order they hold, so they
-- cannot buy a third, and their order endpoint tells that one.
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId   string: remaining stock
-- KEYS[2] -> seckill:order:{shard}:voucherId   hash: user id -> order id
-- KEYS[3] -> seckill:window:{shard}:voucherId  hash: returns counts the
--            units given back (see release.lua)
--
-- ARGV[1] -> user id (decimal)
-- ARGV[2] -> the refused order's id (decimal)
-- ARGV[3] -> the id of the order the buyer holds in the database ("0":
--            not known; the mark is then removed)
--
-- Returns:
--   1  returned: the stock is one more, the mark names the held order
--   0  nothing to return: the mark does not name the refused order (it was
--      returned already, or a rebuild read the buyers from the database)
--  -1  later: the voucher's stock is not loaded; nothing changed

if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
  return 0
end
if ARGV[3] ~= '0' then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
else
  redis.call('HDEL', KEYS[2], ARGV[1])
end
redis.call('INCR', KEYS[1])
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('HINCRBY', KEYS[3], 'returns', 1)
end
return 1
