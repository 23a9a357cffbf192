-- take_back.lua: before a dead-lettered order is re-driven into the
-- database, make sure its unit is its own in the live sale, atomically. A
-- letter's order keeps its unit while the buyer's mark names it; the unit
-- went back on sale if a rebuild dealt the stock anew without it, or the
-- letter was refused as the buyer's second order (return_unit.lua). Such a
-- unit is taken back here where it is still there, or the re-drive skips
-- the letter: persisting an order whose unit the sale also sells oversells.
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId   string: remaining stock
-- KEYS[2] -> seckill:order:{shard}:voucherId   hash: user id -> order id
-- KEYS[3] -> seckill:window:{shard}:voucherId  hash: total, the units on
--            sale (absent in state written before it was kept)
--
-- ARGV[1] -> user id (decimal)
-- ARGV[2] -> order id (decimal) of the dead-lettered order
-- ARGV[3] -> 1: check the state whole first (a master may evict); 0: not
--            (as return_unit.lua)
--
-- Returns {code, order id}:
--   {1, ARGV[2]}   held: the buyer's mark names the order; its unit is its
--                  own already, nothing changed
--   {2, ARGV[2]}   taken back: one unit off the stock and the buyer's mark
--                  names the order (the buyers plus the stock stay the
--                  voucher's total, as seckill.lua checks)
--   {0, ""}        none left: the unit went back on sale and was sold
--   {3, other id}  the buyer holds another order of the voucher
--  {-1, ""}        later: the voucher's stock is not loaded (a rebuild's
--                  fence holds it, or Redis forgot the sale), or the state
--                  is not whole (an evicted buyers hash: a missing mark
--                  says nothing); nothing changed

local stock = redis.call('GET', KEYS[1])
if not stock then
  return {-1, ''}
end
if ARGV[3] == '1' then
  local total = redis.call('HGET', KEYS[3], 'total')
  if total and redis.call('HLEN', KEYS[2]) + tonumber(stock) ~= tonumber(total) then
    return {-1, ''}
  end
end
local mark = redis.call('HGET', KEYS[2], ARGV[1])
if mark == ARGV[2] then
  return {1, ARGV[2]}
end
if mark then
  return {3, mark}
end
if tonumber(stock) <= 0 then
  return {0, ''}
end
redis.call('DECR', KEYS[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return {2, ARGV[2]}
