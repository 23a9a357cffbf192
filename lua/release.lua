-- release.lua: undo one reservation, idempotently. Used when an order
-- reserved with handoff "none" could not be enqueued, and by compensation.
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId   string: remaining stock
-- KEYS[2] -> seckill:order:{shard}:voucherId   hash: user id -> order id
-- KEYS[3] -> seckill:window:{shard}:voucherId  hash: returns counts the
--            units given back (read_bucket.lua: a stock read over several
--            masters tells by it that none came back while it read)
--
-- ARGV[1] -> user id (decimal)
-- ARGV[2] -> order id (decimal) of the reservation to undo
--
-- Returns:
--   1  released: the stock is back and the user may buy again
--   0  nothing to release: the user holds no order, or holds another one
--      (so a second release, or a stale one, changes nothing)

if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('INCR', KEYS[1])
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('HINCRBY', KEYS[3], 'returns', 1)
end
return 1
