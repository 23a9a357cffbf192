-- thaw_bucket.lua: the last step of a rebuild of some of a voucher's
-- buckets, on each bucket it froze (freeze_bucket.lua), after the lost
-- buckets were restored: the units the lost buckets lent or borrowed and
-- had not yet given were counted into their restored stock, so the
-- transfers this bucket has pending from a lost lender are void (their
-- give must never add them again); the bucket takes the buckets' new
-- generation (bucket_take.lua refuses a transfer recorded in another, so
-- no step of a transfer begun before the rebuild moves a unit the rebuild
-- did not count) and the incarnation it is verified in, and the freeze is
-- lifted — all only while the freeze is still this rebuild's.
--
-- KEYS[1] -> seckill:window:{shard}:voucherId/bucket     hash: gen, epoch,
--            units, freeze, freezeUntil
-- KEYS[2] -> seckill:transfers:{shard}:voucherId/bucket  hash: 'in:<id>' ->
--            'lender:want:gen:ms' (see bucket_pend.lua)
--
-- ARGV[1] -> the rebuild's token
-- ARGV[2] -> the buckets' new generation
-- ARGV[3] -> the incarnation the bucket is verified in
-- ARGV[4] -> the voucher's units over all its buckets as restored
--            (read_bucket.lua)
-- ARGV[5..] -> the numbers of the buckets the rebuild restored
--
-- Returns the number of pending transfers voided, or -1 when the freeze is
-- not this rebuild's (it lapsed): nothing done.

local w = redis.call('HMGET', KEYS[1], 'freeze', 'gen')
if w[1] ~= ARGV[1] then
  if not w[1] and w[2] == ARGV[2] then
    return 0 -- a replay: thawed already
  end
  return -1
end
local lost = {}
for i = 5, #ARGV do
  lost[ARGV[i]] = true
end
local voided = 0
local records = redis.call('HGETALL', KEYS[2])
for i = 1, #records, 2 do
  local id = string.match(records[i], '^in:(.+)$')
  if id and lost[string.match(records[i + 1], '^(%d+):')] then
    redis.call('HDEL', KEYS[2], records[i])
    voided = voided + 1
  end
end
redis.call('HSET', KEYS[1], 'gen', ARGV[2], 'epoch', ARGV[3], 'units', ARGV[4])
redis.call('HDEL', KEYS[1], 'freeze', 'freezeUntil')
return voided
