-- fence_voucher.lua: a rebuild takes the voucher's fence and removes its
-- stock in one step, so from then on no reservation of the voucher runs
-- (seckill.lua answers "not loaded") until restore_voucher.lua. The fence
-- lapses on its own, by Redis's clock, should the rebuild die.
--
-- The fence is two fields of the voucher's window hash, not a key of its
-- own with a time to live: a Redis that evicts keys with a TTL first
-- (the volatile-* policies) never picks it, and under the allkeys-*
-- policies it goes only with the window, which is a forgotten voucher
-- anyway (rebuilt).
--
-- KEYS[1] -> seckill:window:{shard}:voucherId   hash: fence (the rebuild's
--            token), fenceUntil (unix ms, Redis's clock), and the window
-- KEYS[2] -> seckill:stock:{shard}:voucherId    string: remaining stock
--
-- ARGV[1] -> the rebuild's token
-- ARGV[2] -> the fence's time to live, in milliseconds
--
-- Returns 1 when fenced (a replay with the same token too: go-redis sends
-- a call again whose reply was lost, and the fence it finds is its own),
-- 0 when another rebuild holds the fence, or a freeze (freeze_bucket.lua:
-- a rebuild of the voucher's other buckets counts on this one's state).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local held = redis.call('HMGET', KEYS[1], 'fence', 'fenceUntil', 'freeze', 'freezeUntil')
if (held[1] and held[1] ~= ARGV[1] and tonumber(held[2]) > now) or
    (held[3] and held[3] ~= ARGV[1] and tonumber(held[4]) > now) then
  return 0
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'fenceUntil', now + tonumber(ARGV[2]))
redis.call('DEL', KEYS[2])
return 1
