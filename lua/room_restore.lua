-- room_restore.lua: puts part of a saved draw back after Redis lost a
-- waiting room (the database keeps each draw once made): the early
-- joiners and their positions, and the draw's size, so that later joiners
-- queue behind it again. Idempotent; a position given since (a place at
-- the back) is kept.
--
-- KEYS[1] -> seckill:room:{shard}:voucherId  hash: the room's state
--            (closed, early: room_join.lua)
-- KEYS[2] -> seckill:room:{shard}:voucherId:early  sorted set: the draw
-- KEYS[3] -> seckill:room:{shard}:voucherId:places  hash: positions
--
-- ARGV[1] -> the draw's size
-- ARGV[2] -> when the room's keys expire, unix ms
-- ARGV[3..] -> triples: the member ("<draw key>:<user id>"), the user id,
--            the position
--
-- Returns the entries put back.

redis.call('HSET', KEYS[1], 'closed', 1, 'early', ARGV[1])
redis.call('HSETNX', KEYS[1], 'frontier', 0)
local n = 0
for i = 3, #ARGV, 3 do
  redis.call('ZADD', KEYS[2], 0, ARGV[i])
  redis.call('HSETNX', KEYS[3], ARGV[i + 1], ARGV[i + 2])
  n = n + 1
end
for i = 1, 3 do
  redis.call('PEXPIREAT', KEYS[i], ARGV[2])
end
return n
