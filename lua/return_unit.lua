-- return_unit.lua: give an order's unit back to the sale, once. A
-- cancelled order's: the database already cancelled it and gave the unit
-- back to its stock column; this does the same for the live state. Or an
-- order the database refused because its buyer holds another
-- (buyer_holds_another: the buyers' hash was lost, and a second
-- reservation went through): the database never took stock for it, the
-- live stock did; the buyer's mark then names the order they hold, so they
-- cannot buy a third and their order endpoint tells that one.
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId   string: remaining stock
-- KEYS[2] -> seckill:order:{shard}:voucherId   hash: user id -> order id
-- KEYS[3] -> seckill:window:{shard}:voucherId  hash: returns counts the
--            units given back (see release.lua)
--
-- ARGV[1] -> user id (decimal)
-- ARGV[2] -> order id (decimal) of the cancelled (or refused) order
-- ARGV[3] -> the order the buyer holds, whose id the mark then names;
--            "0": the mark is removed
-- ARGV[4] -> 1: check the state whole first (a master may evict); 0: every
--            master says noeviction, so no key of the sale vanishes but by
--            a deletion (seckill_batch.lua skips the check then too)
--
-- Returns:
--   1  returned: the stock is one more, and the user may buy again (or
--      their mark names the order they hold)
--   0  nothing to return: the user's mark does not name this order (it was
--      returned already, or a rebuild read the cancellation from the
--      database), so a second return changes nothing
--  -1  later: the voucher's stock is not loaded (a rebuild's fence holds
--      it, or Redis forgot the sale), or the state is not whole (the
--      buyers plus the stock left are not the total: Redis evicted the
--      buyers hash, so no mark can say whether this unit came back);
--      nothing changed, and the caller has the voucher rebuilt, which
--      reads the cancellation from the database

local stock = redis.call('GET', KEYS[1])
if not stock then
  return -1
end
if ARGV[4] == '1' then
  local total = redis.call('HGET', KEYS[3], 'total')
  if total and redis.call('HLEN', KEYS[2]) + tonumber(stock) ~= tonumber(total) then
    return -1
  end
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
