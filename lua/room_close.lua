-- room_close.lua: ends a voucher's early set once the sale has begun by
-- Redis's clock (from then on no join enters it) and lists its joiners in
-- arrival order. The server makes the draw from the list: it keys each
-- joiner, orders them, keeps the draw and writes the positions
-- (room_place.lua); Redis never holds the joiners ordered by their keys.
-- Closing again lists the same joiners.
--
-- KEYS[1] -> seckill:room:{shard}:voucherId  hash: the room's state
--            (closed, early: room_join.lua; closedAt: when the set was
--            first closed, Redis's clock, unix ms)
-- KEYS[2] -> seckill:room:{shard}:voucherId:early  sorted set: the early
--            joiners' user ids, scored by arrival
--
-- ARGV[1] -> the sale's begin, unix ms
-- ARGV[2] -> when the room's keys expire, unix ms
--
-- Returns {0}: the sale has not begun; {1, late, id, id, ...}: how long
-- after the begin the set was first closed (ms; -1 for a set closed
-- before closedAt was kept), then the early joiners, in arrival order. A
-- set first closed long after the begin with nobody in it may be one the
-- live store lost (with its joiners) after the begin: the server then says
-- so rather than publish an empty draw.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local closed = redis.call('HGET', KEYS[1], 'closed') == '1'
if now < tonumber(ARGV[1]) and not closed then
  return {0}
end
if not closed then
  redis.call('HSET', KEYS[1], 'closed', 1, 'early', redis.call('ZCARD', KEYS[2]), 'closedAt', now)
  redis.call('HSETNX', KEYS[1], 'frontier', 0)
  redis.call('PEXPIREAT', KEYS[1], ARGV[2])
end
local members = redis.call('ZRANGE', KEYS[2], 0, -1)
local closedAt = tonumber(redis.call('HGET', KEYS[1], 'closedAt'))
local late = -1
if closedAt then
  late = closedAt - tonumber(ARGV[1])
end
table.insert(members, 1, late)
table.insert(members, 1, 1)
return members
