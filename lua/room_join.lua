-- room_join.lua: gives a shopper a place in a voucher's waiting room, or
-- keeps the one they hold. Before the sale begins a join enters the draw:
-- the early set, which holds user ids by arrival only (nothing in Redis
-- orders them by their draw keys before the draw: the server makes the
-- draw once the set is closed and writes its positions with
-- room_place.lua). From the opening on, a join takes the next place at
-- the back. A place whose admission lapsed unused is given up for one at
-- the back. Every key carries the voucher's shard tag.
--
-- KEYS[1] -> seckill:room:{shard}:voucherId  hash: the room's state:
--            closed (1 once the early set is final), early (its size
--            then), arrivals (the early joins counted), next (places
--            given at the back), frontier (the last admitted position),
--            placed (the draw's positions written), and room_admit.lua's
--            fields
-- KEYS[2] -> seckill:room:{shard}:voucherId:early  sorted set: the early
--            joiners' user ids, scored by arrival
-- KEYS[3] -> seckill:room:{shard}:voucherId:places  hash: user id -> its
--            position (an early joiner's written from the draw by
--            room_place.lua; a later joiner's here)
-- KEYS[4] -> seckill:room:{shard}:voucherId:admitted  sorted set: the
--            admission passes, "from:to:ms" scored by to
-- KEYS[5] -> seckill:room:{shard}:voucherId:used  sorted set: positions
--            whose admission bought, scored by the position
--
-- ARGV[1] -> the user id
-- ARGV[2] -> the room's opening, unix ms
-- ARGV[3] -> the sale's begin, unix ms
-- ARGV[4] -> the sale's end, unix ms
-- ARGV[5] -> the admission's lifetime, ms
-- ARGV[6] -> when the room's keys expire, unix ms
-- ARGV[7] -> the kept draw's size (-1: not known; the early set's size
--            is then the draw's)
--
-- Returns {0, position}: joined (position 0: in the draw, its position
-- not yet written); {1, 0}: the room is not open yet; {2, 0}: the sale has
-- ended.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(ARGV[2]) then
  return {1, 0}
end
if now >= tonumber(ARGV[4]) then
  return {2, 0}
end
local closed = redis.call('HGET', KEYS[1], 'closed') == '1'
local drawing = now < tonumber(ARGV[3]) and not closed

-- lapsed: the position was admitted, unused, and its admission is over.
local function lapsed(pos)
  local frontier = tonumber(redis.call('HGET', KEYS[1], 'frontier') or '0')
  if pos > frontier or redis.call('ZSCORE', KEYS[5], pos) then
    return false
  end
  local pass = redis.call('ZRANGEBYSCORE', KEYS[4], pos, '+inf', 'LIMIT', 0, 1)[1]
  local at = tonumber(string.match(pass or '', ':(%d+)$') or now)
  return at + tonumber(ARGV[5]) <= now
end

local pos = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
if pos == 0 and redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return {0, 0}
end
if pos > 0 and not lapsed(pos) then
  return {0, pos}
end

local function keep()
  for i = 1, 5 do
    redis.call('PEXPIREAT', KEYS[i], ARGV[6])
  end
end
if drawing then
  local arrival = redis.call('HINCRBY', KEYS[1], 'arrivals', 1)
  redis.call('ZADD', KEYS[2], arrival, ARGV[1])
  redis.call('HSETNX', KEYS[1], 'frontier', 0)
  keep()
  return {0, 0}
end
if not closed then
  local early = tonumber(ARGV[7])
  if early < 0 then
    early = redis.call('ZCARD', KEYS[2])
  end
  redis.call('HSET', KEYS[1], 'closed', 1, 'early', early)
end
pos = tonumber(redis.call('HGET', KEYS[1], 'early')) + redis.call('HINCRBY', KEYS[1], 'next', 1)
redis.call('HSET', KEYS[3], ARGV[1], pos)
keep()
return {0, pos}
