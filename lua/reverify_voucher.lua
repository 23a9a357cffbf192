-- reverify_voucher.lua: carries one voucher's (or one bucket's) live state
-- over to a new incarnation of Redis without a rebuild, when the master
-- that holds it is the one that wrote it: the incarnation changed because
-- another master restarted or failed over, and this state is as it was.
-- This step checks, atomically, what only this master can tell: the state
-- was written by this very server (its run_id, read here: a server
-- restarted from an older snapshot has the same keys and another run_id),
-- no forgetting was recorded on it since (its shard's mark is the one the
-- state was written under), the state is still the one the caller judged,
-- whole, and no rebuild holds it.
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId[/bucket]   string: remaining
--            stock
-- KEYS[2] -> seckill:window:{shard}:voucherId[/bucket]  hash: node (the
--            run_id of the master that wrote the state), mark (the
--            forgetting mark it was written under), epoch (the incarnation
--            it was verified in), total, a rebuild's fence or freeze
-- KEYS[3] -> seckill:order:{shard}:voucherId[/bucket]   hash: the buyers
-- KEYS[4] -> seckill:forgets:{shard}                   string: the mark of
--            the last forgetting (Identity.Forget), kept on the shard
--
-- ARGV[1] -> the incarnation the caller found recorded (epoch)
-- ARGV[2] -> the incarnation to record now
--
-- Returns:
--   1   carried over (a replay, finding ARGV[3] recorded, too)
--   0   not: written by another server (restarted, failed over, or
--       from an older snapshot), a forgetting recorded since, changed since the caller read it, not
--       whole, or fenced; nothing done, the caller rebuilds

local info = redis.pcall('INFO', 'server')
local node = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or nil
local w = redis.call('HMGET', KEYS[2], 'node', 'epoch', 'total', 'fence', 'freeze', 'mark')
if not node or w[1] ~= node or w[4] or w[5] or (w[6] or '') ~= (redis.call('GET', KEYS[4]) or '') then
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
