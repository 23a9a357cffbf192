-- mark_node.lua: records in a voucher's (or a bucket's) window the run_id
-- of the server that wrote its state and the shard's forgetting mark, run
-- in the transaction that loads it, so that reverify_voucher.lua can
-- carry the state over to a new incarnation while that server still holds
-- it and recorded no forgetting since. A server that cannot tell its
-- run_id gets no node (its state is rebuilt instead).
--
-- KEYS[1] -> seckill:window:{shard}:voucherId[/bucket]  hash: node, mark
-- KEYS[2] -> seckill:forgets:{shard}  string: the shard's forgetting mark
--
-- ARGV: none
--
-- Returns 1 when marked, 0 when the server has no run_id to give.

local info = redis.pcall('INFO', 'server')
local node = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or nil
if not node then
  return 0
end
redis.call('HSET', KEYS[1], 'node', node)
local mark = redis.call('GET', KEYS[2])
if mark then
  redis.call('HSET', KEYS[1], 'mark', mark)
end
return 1
