-- shard_identity.lua: what a consumer's repair asks the master of one
-- shard when Redis's incarnation cannot be read whole (a cluster master
-- out of reach): this server's run_id and the shard's forgetting mark,
-- read in one step on the master that holds the shard
-- (Reserver.Unaffected).
--
-- KEYS[1] -> seckill:forgets:{shard}   string: the mark of the last
--            forgetting kept on the shard (Identity.Forget)
--
-- ARGV: none
--
-- Returns {run_id, mark}: '' for a server that cannot tell its run_id, or
-- for a shard with no mark.

local info = redis.pcall('INFO', 'server')
local node = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or ''
return {node, redis.call('GET', KEYS[1]) or ''}
