-- freeze_bucket.lua: a rebuild of some of a voucher's buckets (those a
-- master's restart lost) freezes each bucket that is intact, so that its
-- total and its transfer records hold still while the rebuild counts the
-- lost buckets' units: shoppers go on buying from a frozen bucket, but no
-- unit moves into or out of it (bucket_take.lua and bucket_give.lua answer
-- "not loaded", never a grant of none) until thaw_bucket.lua, or the
-- freeze lapses (by Redis's clock) should the rebuild die.
--
-- A bucket is intact when the server running this is the one that wrote
-- its state (the window's node is this server's run_id: one restarted
-- from an older snapshot has the same keys and another run_id), no
-- forgetting was recorded on it since (the shard's mark is the window's),
-- and it is whole (buyers plus stock equal its total).
--
-- KEYS[1] -> seckill:window:{shard}:voucherId/bucket  hash: node, mark, total,
--            and the marks of rebuilds: fence, fenceUntil (a fence,
--            fence_voucher.lua), freeze, freezeUntil (a freeze)
-- KEYS[2] -> seckill:stock:{shard}:voucherId/bucket   string: its stock
-- KEYS[3] -> seckill:order:{shard}:voucherId/bucket   hash: its buyers
-- KEYS[4] -> seckill:forgets:{shard}                  string: the shard's
--            forgetting mark (Identity.Forget)
--
-- ARGV[1] -> the rebuild's token
-- ARGV[2] -> the freeze's time to live, in milliseconds
--
-- Returns:
--   1   frozen (a replay with the same token too)
--   0   not intact: nothing done (the caller fences it and rebuilds it)
--  -1   another rebuild holds it (a fence or a freeze not yet lapsed)

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local w = redis.call('HMGET', KEYS[1], 'node', 'total', 'fence', 'fenceUntil', 'freeze', 'freezeUntil', 'mark')
if (w[3] and w[3] ~= ARGV[1] and tonumber(w[4]) > now) or (w[5] and w[5] ~= ARGV[1] and tonumber(w[6]) > now) then
  return -1
end
local info = redis.pcall('INFO', 'server')
local node = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or nil
local stock = redis.call('GET', KEYS[2])
if not node or w[1] ~= node or (w[7] or '') ~= (redis.call('GET', KEYS[4]) or '') or not w[2] or not stock or
    redis.call('HLEN', KEYS[3]) + tonumber(stock) ~= tonumber(w[2]) then
  return 0
end
redis.call('HSET', KEYS[1], 'freeze', ARGV[1], 'freezeUntil', now + tonumber(ARGV[2]))
return 1
