-- naive.lua: the seed's original reservation, as the classic design first
-- writes it — stock, one order per user by a set, the stream — kept only
-- as the reference the benchmarks measure the reservation against (the
-- bench's naive handler, BenchmarkReserve's naive mode). It keeps none of
-- the rules the service adds: no window, no limit, no replay, no deadline.
--
-- KEYS[1] -> naive:stock:voucherId  string: remaining stock
-- KEYS[2] -> naive:order:voucherId  set: the buyers' user ids
-- KEYS[3] -> naive:orders           stream: the orders
--
-- ARGV[1] -> user id
-- ARGV[2] -> voucher id
-- ARGV[3] -> order id
--
-- Returns 0 reserved, 1 sold out, 2 the user already bought.

if tonumber(redis.call('GET', KEYS[1]) or '0') <= 0 then
  return 1
end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return 2
end
redis.call('INCRBY', KEYS[1], -1)
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('XADD', KEYS[3], '*', 'userId', ARGV[1], 'voucherId', ARGV[2], 'id', ARGV[3])
return 0
