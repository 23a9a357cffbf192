-- reverify_voucher.lua: carries one voucher's (or one bucket's) live state
-- over to a new incarnation of Redis without a rebuild, when the master
-- that holds it is the one that wrote it: the incarnation changed because
-- another master restarted or failed over, and this state is as it was.
-- The caller has checked that no forgetting was recorded since; this step
-- checks, atomically, what only this master can tell: the state was
-- written by this very server (its run_id, read here: a server restarted
-- from an older snapshot has the same keys and another run_id), is still
-- the state the caller judged, is whole, and no rebuild holds it.
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId[/bucket]   string: remaining
--            stock
-- KEYS[2] -> seckill:window:{shard}:voucherId[/bucket]  hash: node (the
--            run_id of the master that wrote the state), epoch (the
--            incarnation it was verified in), total, the fence
-- KEYS[3] -> seckill:order:{shard}:voucherId[/bucket]   hash: the buyers
--
-- ARGV[1] -> the incarnation the caller found recorded (epoch)
-- ARGV[2] -> the incarnation to record now
--
-- Returns:
--   1   carried over (a replay, finding ARGV[3] recorded, too)
--   0   not: written by another server (restarted, failed over, or
--       from an older snapshot), changed since the caller read it, not
--       whole, or fenced; nothing done, the caller rebuilds

local info = redis.pcall('INFO', 'server')
local node = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or nil
local w = redis.call('HMGET', KEYS[2], 'node', 'epoch', 'total', 'fence')
if not node or w[1] ~= node or w[4] then
  return 0
end
if w[2] == ARGV[2] then
  return 1
end
if w[2] ~= ARGV[1] then
  return 0
end
local stock = redis.call('GET', KEYS[1])
if not stock or not w[3] or redis.call('HLEN', KEYS[3]) + tonumber(stock) ~= tonumber(w[3]) then
  return 0
end
redis.call('HSET', KEYS[2], 'epoch', ARGV[2])
return 1
