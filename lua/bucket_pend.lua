-- bucket_pend.lua: the first step of a transfer of units between two
-- buckets of one voucher (core.Voucher.Buckets): the borrowing bucket,
-- dry, records the transfer as pending before any unit moves. Each step
-- runs on one bucket (the buckets are on different cluster slots), so the
-- record is what makes the transfer survive a crash between the steps:
-- bucket_take.lua takes units from the lender once per transfer id,
-- bucket_give.lua adds them here once and removes the record, and a duty
-- re-drives a record left pending (redisreserve's transfers.go).
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId[/bucket]      string: the
--            borrower's remaining stock
-- KEYS[2] -> seckill:window:{shard}:voucherId[/bucket]     hash: its window,
--            with gen: the generation of the voucher's buckets (a rebuild
--            writes a new one into every bucket)
-- KEYS[3] -> seckill:transfers:{shard}:voucherId[/bucket]  hash:
--            'in:<id>' -> 'lender:want:gen:ms', a transfer pending into this
--            bucket; 'out:<id>' -> 'units:borrower:ms', one granted from it
--
-- ARGV[1] -> the transfer id
-- ARGV[2] -> the lender's bucket number
-- ARGV[3] -> how many units the borrower asks for at most
--
-- Returns {1, gen, ms}: recorded (gen the borrower's generation, ms the
-- record's time on this Redis's clock, both for bucket_take.lua); {0, '',
-- 0}: the bucket is not loaded (a rebuild's fence holds it): nothing
-- recorded.

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, '', 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gen = redis.call('HGET', KEYS[2], 'gen') or ''
redis.call('HSET', KEYS[3], 'in:' .. ARGV[1], ARGV[2] .. ':' .. ARGV[3] .. ':' .. gen .. ':' .. now)
return {1, gen, now}
