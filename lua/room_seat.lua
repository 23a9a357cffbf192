-- room_seat.lua: a shopper's place in a voucher's waiting room, read in
-- one step and a bounded number of reads whatever the room's size (a
-- position is a field; an early joiner has none until the draw's
-- positions are written; never a scan). Writes nothing.
--
-- KEYS[1] -> seckill:room:{shard}:voucherId  hash: the room's state
--            (room_join.lua)
-- KEYS[2] -> seckill:room:{shard}:voucherId:early  sorted set: the early
--            joiners' user ids, by arrival
-- KEYS[3] -> seckill:room:{shard}:voucherId:places  hash: positions
-- KEYS[4] -> seckill:room:{shard}:voucherId:admitted  sorted set: passes
-- KEYS[5] -> seckill:room:{shard}:voucherId:used  sorted set: used
--            positions
--
-- ARGV[1] -> the user id
--
-- Returns {joined, position, frontier, admittedAt, used, soldout, now}:
-- joined 0/1; position 0 while the draw's positions are not written;
-- frontier the last admitted position; admittedAt the unix ms the
-- position was admitted (0: not yet); used 0/1; soldout 0/1 (the last
-- admission pass found no unit); now the Redis clock, unix ms.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'frontier', 'soldout')
local frontier = tonumber(state[1] or '0')
local soldout = tonumber(state[2] or '0')
local pos = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
if pos == 0 then
  if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
    return {1, 0, frontier, 0, 0, soldout, now}
  end
  return {0, 0, frontier, 0, 0, soldout, now}
end
local at, used = 0, 0
if pos <= frontier then
  local pass = redis.call('ZRANGEBYSCORE', KEYS[4], pos, '+inf', 'LIMIT', 0, 1)[1]
  at = tonumber(string.match(pass or '', ':(%d+)$') or '0')
  if redis.call('ZSCORE', KEYS[5], pos) then
    used = 1
  end
end
return {1, pos, frontier, at, used, soldout, now}
