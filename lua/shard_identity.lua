-- shard_identity.lua: what a consumer's repair asks the master of one
-- shard when Redis's incarnation cannot be read whole (a cluster master
-- out of reach), in one step on the master that holds the shard
-- (Reserver.Unaffected): this server's run_id, the shard's forgetting
-- mark, and how many of the given buckets' states are still as they were
-- in the incarnation the orders were read in — written by this very
-- server, under the shard's mark as it is, recorded as verified in that
-- incarnation (a rebuild or a carry-over to a later one records that
-- one), and neither fenced nor frozen by a rebuild: reverify_voucher.lua's
-- checks, reading only.
--
-- KEYS[1] -> seckill:forgets:{shard}   string: the mark of the last
--            forgetting kept on the shard (Identity.Forget)
-- KEYS[2..] -> seckill:window:{shard}:voucherId[/bucket]   hash: node,
--            mark, epoch, fence, freeze (restore_voucher.lua)
--
-- ARGV[1] -> the incarnation the orders were read in
--
-- Returns {run_id, mark, unchanged}: '' for a server that cannot tell its
-- run_id, or for a shard with no mark; unchanged, the buckets of
-- KEYS[2..] whose state is as it was.

local info = redis.pcall('INFO', 'server')
local node = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or ''
local mark = redis.call('GET', KEYS[1]) or ''
local unchanged = 0
for i = 2, #KEYS do
  local w = redis.call('HMGET', KEYS[i], 'node', 'epoch', 'mark', 'fence', 'freeze')
  if node ~= '' and w[1] == node and w[2] == ARGV[1] and (w[3] or '') == mark and not w[4] and not w[5] then
    unchanged = unchanged + 1
  end
end
return {node, mark, unchanged}
