-- read_bucket.lua: one bucket of a voucher in buckets, read at one
-- moment, for a stock count over several Redis masters, where no one read
-- sees every bucket at once (Reserver.RemainingStock on a cluster).
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId/bucket   string: the bucket's
--            remaining stock
-- KEYS[2] -> seckill:window:{shard}:voucherId/bucket  hash: units (the
--            voucher's units over all its buckets: sold or left, the same
--            in every bucket), returns (units this bucket got back from
--            buyers: releases and cancellations), gen (the buckets'
--            generation, new with each rebuild)
-- KEYS[3] -> seckill:order:{shard}:voucherId/bucket   hash: user id ->
--            order id, the bucket's buyers
--
-- ARGV: none
--
-- Returns {stock, buyers, units, returns, gen}:
--   stock    the bucket's remaining stock, -1 when it is not loaded (never
--            was, or a rebuild's fence holds it)
--   buyers   how many buyers the bucket holds
--   units    the window's units, -1 when it has none (state written before
--            they were kept)
--   returns  the window's count of units given back (0: none yet)
--   gen      the window's generation ('' before the first rebuild)

local stock = redis.call('GET', KEYS[1])
local w = redis.call('HMGET', KEYS[2], 'units', 'returns', 'gen')
return {
  tonumber(stock or -1),
  redis.call('HLEN', KEYS[3]),
  tonumber(w[1] or -1),
  tonumber(w[2] or 0),
  w[3] or '',
}
