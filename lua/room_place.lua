-- room_place.lua: writes part of a voucher's draw into its waiting room:
-- the early joiners' positions, the draw's size and how many positions
-- are written (room_admit.lua admits nobody until all are). The server
-- calls it with the draw it made, or with the kept one after Redis lost
-- the room (the joiners go back into the early set). Idempotent; a
-- position given since (a place at the back) is kept.
--
-- KEYS[1] -> seckill:room:{shard}:voucherId  hash: the room's state
--            (closed, early, placed: room_join.lua)
-- KEYS[2] -> seckill:room:{shard}:voucherId:early  sorted set: the early
--            joiners' user ids
-- KEYS[3] -> seckill:room:{shard}:voucherId:places  hash: positions
--
-- ARGV[1] -> the draw's size
-- ARGV[2] -> when the room's keys expire, unix ms
-- ARGV[3..] -> pairs: the user id, its position (consecutive, from the
--            chunk's first)
--
-- Returns the positions written so far (the draw's size once all are).

redis.call('HSET', KEYS[1], 'closed', 1, 'early', ARGV[1])
redis.call('HSETNX', KEYS[1], 'frontier', 0)
local last = 0
for i = 3, #ARGV, 2 do
  redis.call('ZADD', KEYS[2], 'NX', ARGV[i + 1], ARGV[i])
  redis.call('HSETNX', KEYS[3], ARGV[i], ARGV[i + 1])
  last = tonumber(ARGV[i + 1])
end
local placed = tonumber(redis.call('HGET', KEYS[1], 'placed') or '0')
if last > placed then
  placed = last
  redis.call('HSET', KEYS[1], 'placed', placed)
end
for i = 1, 3 do
  redis.call('PEXPIREAT', KEYS[i], ARGV[2])
end
return placed
