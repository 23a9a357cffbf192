-- bucket_give.lua: the borrower's last step of a transfer between two
-- buckets of a voucher (see bucket_pend.lua): adds the units the lender
-- granted and removes the pending record, in one step, so the units
-- arrive once however often it runs.
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId[/bucket]      string: the
--            borrower's remaining stock
-- KEYS[2] -> seckill:window:{shard}:voucherId[/bucket]     hash: its window
--            (total, a rebuild's freeze)
-- KEYS[3] -> seckill:transfers:{shard}:voucherId[/bucket]  hash: see
--            bucket_pend.lua
--
-- ARGV[1] -> the transfer id
-- ARGV[2] -> the units the lender granted (0: none; the record goes)
--
-- Returns:
--   1   applied: the units are this bucket's, the record gone
--   0   nothing pending under this id (applied before, or a rebuild wiped
--       it and counted every unit afresh): nothing done
--  -1   the bucket is not loaded (a rebuild's fence holds it), or frozen
--       while a rebuild counts the voucher's lost buckets
--       (freeze_bucket.lua): nothing done, the record stays

if not redis.call('HGET', KEYS[3], 'in:' .. ARGV[1]) then
  return 0
end
local freeze = redis.call('HMGET', KEYS[2], 'freeze', 'freezeUntil')
if freeze[1] then
  local t = redis.call('TIME')
  if tonumber(freeze[2]) > tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
    return -1
  end
end
local n = tonumber(ARGV[2])
if n > 0 then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    return -1
  end
  redis.call('INCRBY', KEYS[1], n)
  if redis.call('HEXISTS', KEYS[2], 'total') == 1 then
    redis.call('HINCRBY', KEYS[2], 'total', n)
  end
end
redis.call('HDEL', KEYS[3], 'in:' .. ARGV[1])
return 1
