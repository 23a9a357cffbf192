-- restore_voucher.lua: replaces one voucher's live state with what a
-- rebuild computed from the database and the queue, and lifts the
-- rebuild's fence, all at once. The buyers were staged before, in chunks
-- (restore_buyers.lua); they replace the live buyers here by a RENAME. It
-- runs only while the rebuild still holds the fence: one that outlived its
-- fence (and whose voucher another rebuild may have restored since)
-- changes nothing.
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId    string: remaining stock
-- KEYS[2] -> seckill:window:{shard}:voucherId   hash: begin, end, epoch,
--            node, mark, total, and the fence: fence (a rebuild's token), fenceUntil
--            (unix ms, Redis's clock; see fence_voucher.lua)
-- KEYS[3] -> seckill:order:{shard}:voucherId    hash: user id -> order id
-- KEYS[4] -> seckill:order:{shard}:voucherId:restoring:<token>  hash: the
--            staged buyers (restore_buyers.lua)
-- KEYS[5] -> seckill:transfers:{shard}:voucherId  hash: transfers between
--            the voucher's buckets (bucket_pend.lua); the rebuild counted
--            every unit afresh, so those under way are void
-- KEYS[6] -> seckill:forgets:{shard}  string: the shard's forgetting mark
--            (Identity.Forget), recorded with the state as 'mark'
-- (for one bucket of a bucketed voucher, that bucket's keys: name:id/b)
--
-- ARGV[1] -> the rebuild's fence token
-- ARGV[2] -> window begin (unix ms)
-- ARGV[3] -> window end (unix ms)
-- ARGV[4] -> remaining stock
-- ARGV[5] -> the live store's incarnation the state is rebuilt for
-- ARGV[6] -> how many buyers were staged
-- ARGV[7] -> the buckets' new generation (bucket_take.lua refuses a
--            transfer recorded in another)
-- ARGV[8] -> how many buckets the voucher has
-- ARGV[9] -> the voucher's units over all its buckets, each left or a
--            buyer's (read_bucket.lua)
-- ARGV[10] -> the operator's pause, as the database has it (seckill.lua's
--            paused: '0' on sale)
--
-- Returns:
--   1   restored (a replay of this restore too: go-redis resends a call
--       whose reply was lost, and finds the fence lifted and the
--       generation this restore wrote)
--   0   the fence is not this rebuild's (expired, or another's): nothing done
--  -1   the staged buyers are not as many as ARGV[6] (a chunk went
--       missing): nothing done, the fence stays until it expires

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fence = redis.call('HMGET', KEYS[2], 'fence', 'fenceUntil', 'gen')
if not fence[1] and fence[3] == ARGV[7] then
  return 1
end
if fence[1] ~= ARGV[1] or tonumber(fence[2]) <= now then
  return 0
end
local buyers = tonumber(ARGV[6])
if redis.call('HLEN', KEYS[4]) ~= buyers then
  return -1
end
if buyers > 0 then
  redis.call('RENAME', KEYS[4], KEYS[3])
  redis.call('PERSIST', KEYS[3])
else
  redis.call('DEL', KEYS[3])
end
redis.call('DEL', KEYS[2], KEYS[5])
-- total: the units on sale, each left or a buyer's (seckill.lua checks it).
local total = tonumber(ARGV[4]) + buyers
redis.call('HSET', KEYS[2], 'begin', ARGV[2], 'end', ARGV[3], 'epoch', ARGV[5], 'total', total,
  'gen', ARGV[7], 'buckets', ARGV[8], 'units', ARGV[9], 'paused', ARGV[10] or '0')
-- node: this server's run_id (none on a server that cannot tell it), and
-- mark: the shard's forgetting mark, so that reverify_voucher.lua carries
-- the state over to a new incarnation only while the server that wrote it
-- holds it and recorded no forgetting since.
local mark = redis.call('GET', KEYS[6])
if mark then
  redis.call('HSET', KEYS[2], 'mark', mark)
end
local info = redis.pcall('INFO', 'server')
local node = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or nil
if node then
  redis.call('HSET', KEYS[2], 'node', node)
end
redis.call('SET', KEYS[1], ARGV[4])
return 1
