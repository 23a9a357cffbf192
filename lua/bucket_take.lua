-- bucket_take.lua: the lender's step of a transfer between two buckets
-- of a voucher (see bucket_pend.lua): takes up to half of the lender's
-- stock (rounded up), at most what the borrower asked, and records what
-- it granted under the transfer id — none too — so that a replay answers
-- the same and takes nothing more. (A grant of none left unrecorded let a
-- later replay take units after the transfer had been closed with none:
-- units taken and given to nobody.) The units leave the lender's total with its stock:
-- every unit of a bucket is still left or a buyer's (seckill.lua's
-- check), and the units in transit are the lender's 'out:' records whose
-- borrower still has the transfer pending.
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId[/bucket]      string: the
--            lender's remaining stock
-- KEYS[2] -> seckill:window:{shard}:voucherId[/bucket]     hash: its window
--            (total, gen, a rebuild's freeze)
-- KEYS[3] -> seckill:transfers:{shard}:voucherId[/bucket]  hash: see
--            bucket_pend.lua
--
-- ARGV[1] -> the transfer id
-- ARGV[2] -> the borrower's bucket number
-- ARGV[3] -> units asked for at most
-- ARGV[4] -> the generation the borrower recorded the transfer in
-- ARGV[5] -> when the borrower recorded it (unix ms, its Redis's clock)
-- ARGV[6] -> how old a transfer may be and still take units (ms): older,
--            it takes none, so a transfer record cleaned up after that age
--            can never be taken again
--
-- Returns:
--   n >= 0  units granted (0: the lender had none to spare), recorded
--   -1      the lender is not loaded (a rebuild's fence holds it), or
--           frozen (freeze_bucket.lua) while a rebuild counts the units
--           of the voucher's lost buckets: nothing taken, and no grant of
--           none, which would tell a shopper sold out
--   -2      the transfer is too old: nothing taken, and nothing ever will be
--   -3      the lender is of another generation (a rebuild ran between
--           the steps): nothing taken

local prior = redis.call('HGET', KEYS[3], 'out:' .. ARGV[1])
if prior then
  return tonumber(string.match(prior, '^(%d+)'))
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now - tonumber(ARGV[5]) > tonumber(ARGV[6]) then
  return -2
end
local stock = redis.call('GET', KEYS[1])
if not stock then
  return -1
end
local window = redis.call('HMGET', KEYS[2], 'gen', 'total', 'freeze', 'freezeUntil')
if window[3] and tonumber(window[4]) > now then
  return -1
end
if (window[1] or '') ~= ARGV[4] then
  return -3
end
local n = math.max(math.min(tonumber(ARGV[3]), math.ceil(tonumber(stock) / 2)), 0)
if n > 0 then
  redis.call('DECRBY', KEYS[1], n)
  if window[2] then
    redis.call('HINCRBY', KEYS[2], 'total', -n)
  end
end
redis.call('HSET', KEYS[3], 'out:' .. ARGV[1], n .. ':' .. ARGV[2] .. ':' .. now)
return n
