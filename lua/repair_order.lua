-- repair_order.lua: after Redis forgot a sale, a consumer that commits an
-- order it read before the loss tells Redis about it: the buyer is marked
-- and the stock taken, only if the buyer was unknown. A rebuild that
-- already counted the order leaves nothing to do, so the repair is
-- idempotent and an order never takes the stock twice.
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId   string: remaining stock
-- KEYS[2] -> seckill:order:{shard}:voucherId   hash: user id -> order id
--
-- ARGV[1] -> user id
-- ARGV[2] -> order id
--
-- Returns:
--   0   nothing to do: Redis knows this order
--   1   repaired: buyer marked, one stock taken
--   2   the voucher has no live state (being rebuilt, or forgotten): ensure
--       it and repair again
--   3   the buyer holds another order in Redis: left alone (an anomaly the
--       store reports)
--   4   buyer marked, but no stock was left to take: Redis sold this
--       order's unit again, and the database will refuse one order

local stock = redis.call('GET', KEYS[1])
if not stock then
  return 2
end
local held = redis.call('HGET', KEYS[2], ARGV[1])
if held == ARGV[2] then
  return 0
end
if held then
  return 3
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
if tonumber(stock) <= 0 then
  return 4
end
redis.call('DECR', KEYS[1])
return 1
