-- verify_bucket.lua: whether one bucket of a voucher in buckets is intact,
-- so that its shoppers can buy while the voucher's other buckets are
-- rebuilt (core.Recovery.EnsureShopper): the server running this is the
-- one that wrote the bucket's state (the window's node is this server's
-- run_id: one restarted from an older snapshot has the same keys and
-- another run_id), no forgetting was recorded on it since (the shard's
-- mark is the window's), and it is loaded and whole (buyers plus stock
-- equal its total; a fence removes the stock). A freeze (freeze_bucket.lua:
-- the rebuild of the other buckets under way) is no obstacle: it holds
-- only transfers still. Nothing is written.
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId/bucket   string: its stock
-- KEYS[2] -> seckill:window:{shard}:voucherId/bucket  hash: node, mark, total
-- KEYS[3] -> seckill:order:{shard}:voucherId/bucket   hash: its buyers
-- KEYS[4] -> seckill:forgets:{shard}                  string: the shard's
--            forgetting mark (Identity.Forget)
--
-- ARGV: none
--
-- Returns 1 when intact, 0 when not.

local info = redis.pcall('INFO', 'server')
local node = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or nil
local w = redis.call('HMGET', KEYS[2], 'node', 'mark', 'total')
local stock = redis.call('GET', KEYS[1])
if not node or w[1] ~= node or (w[2] or '') ~= (redis.call('GET', KEYS[4]) or '') or not w[3] or not stock or
    redis.call('HLEN', KEYS[3]) + tonumber(stock) ~= tonumber(w[3]) then
  return 0
end
return 1
