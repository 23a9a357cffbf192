-- restore_buyers.lua: stages one chunk of a rebuild's buyers, while the
-- rebuild holds the voucher's fence. A voucher of 100,000 buyers is
-- restored in chunks, each a short script, instead of one that would hold
-- Redis for the whole list; restore_voucher.lua then swaps the staged hash
-- in, sets the stock and window, and lifts the fence in one step, so
-- shoppers see the old state (fenced) or the new one, never a part.
--
-- KEYS[1] -> seckill:window:{shard}:voucherId   hash: ..., fence (a
--            rebuild's token), fenceUntil (unix ms, Redis's clock)
-- KEYS[2] -> seckill:order:{shard}:voucherId:restoring:<token>  hash: the
--            staged buyers, user id -> order id; expires with the fence
--
-- ARGV[1] -> the rebuild's fence token
-- ARGV[2..] -> buyers: user id, order id, user id, order id, ...
--
-- Returns:
--   1   staged
--   0   the fence is not this rebuild's (expired, or another's): nothing done

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fence = redis.call('HMGET', KEYS[1], 'fence', 'fenceUntil')
if fence[1] ~= ARGV[1] or tonumber(fence[2]) <= now then
  return 0
end
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
-- A rebuild that dies mid-way leaves nothing behind for long.
redis.call('PEXPIREAT', KEYS[2], fence[2])
return 1
