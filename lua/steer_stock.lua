-- steer_stock.lua: an operator's change of a voucher's stock by delta
-- units, with sales running, once. The database recorded the action first
-- (pending, with its id); this takes or adds the units in the live state,
-- and the database's stock column follows (core/steer). An action run
-- again (its instance died before the database followed, and another
-- finishes it) is answered as the first time, by its id: nothing twice.
-- A rebuild rewrites the window from the database, which lacks the change
-- until it followed: the action then applies afresh, and still counts
-- once.
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId   string: remaining stock
-- KEYS[2] -> seckill:window:{shard}:voucherId  hash: total and units (the
--            units on sale, each left or a buyer's: they move with the
--            stock), steered (the last stock action's id) and steeredOk
--            ('1' applied, '0' refused)
--
-- ARGV[1] -> the action's id
-- ARGV[2] -> delta (non-zero, either sign)
--
-- Returns {code, remaining}:
--   {1, n}   applied: n units left now
--   {0, n}   refused: taking more than remains (sold units are never
--            taken back); n left
--   {-1, 0}  not loaded (a rebuild's fence holds it, or Redis forgot the
--            sale): nothing done; asked again once rebuilt, it applies

local stock = redis.call('GET', KEYS[1])
if not stock then
  return {-1, 0}
end
local left = tonumber(stock)
local w = redis.call('HMGET', KEYS[2], 'steered', 'steeredOk', 'total', 'units')
if w[1] == ARGV[1] then
  return {tonumber(w[2]), left}
end
local delta = tonumber(ARGV[2])
if left + delta < 0 then
  redis.call('HSET', KEYS[2], 'steered', ARGV[1], 'steeredOk', 0)
  return {0, left}
end
redis.call('INCRBY', KEYS[1], delta)
if w[3] then
  redis.call('HINCRBY', KEYS[2], 'total', delta)
end
if w[4] then
  redis.call('HINCRBY', KEYS[2], 'units', delta)
end
redis.call('HSET', KEYS[2], 'steered', ARGV[1], 'steeredOk', 1)
return {1, left + delta}
