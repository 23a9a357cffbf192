-- room_admit.lua: one admission pass over a voucher's waiting room. Any
-- instance may make one at any time: the pass admits what the rate has
-- allowed since the last pass, whoever made it (a token bucket of one
-- second's burst, on Redis's clock), plus one place for each admission
-- that lapsed unused since; the next positions in order, recorded as one
-- pass "from:to:ms". Nothing is admitted while no unit is left, and no
-- burst saved: when units come back, admission resumes at the rate.
-- Nothing is admitted either until the draw's positions are all written
-- (room_place.lua): the first pass after the begin closes the early set,
-- and the server makes the draw and writes them.
--
-- KEYS[1] -> seckill:room:{shard}:voucherId  hash: the room's state
--            (room_join.lua's fields, and credit: the bucket's tokens;
--            tick: the last pass, unix ms; owed: places owed for lapsed
--            admissions; checked: the last position whose admission was
--            settled; noshows: admissions lapsed unused; soldout 0/1;
--            soldoutAt: when no unit was first found, unix ms)
-- KEYS[2] -> seckill:room:{shard}:voucherId:early  sorted set: the early
--            joiners
-- KEYS[3] -> seckill:room:{shard}:voucherId:admitted  sorted set: passes
-- KEYS[4] -> seckill:room:{shard}:voucherId:used  sorted set: used
--            positions
-- KEYS[5] -> seckill:room:{shard}:voucherId:places  hash: positions
--
-- ARGV[1] -> places admitted per second
-- ARGV[2] -> the admission's lifetime, ms
-- ARGV[3] -> the sale's begin, unix ms
-- ARGV[4] -> units left (0: sold out)
-- ARGV[5] -> when the room's keys expire, unix ms
-- ARGV[6] -> at most this many passes settled per call
-- ARGV[7] -> the kept draw's size (-1: not known; the early set's size
--            is then the draw's)
--
-- Returns {admitted, frontier, joined, noshows, soldout, soldoutAt,
-- unplaced, early}: the places this pass admitted, the last admitted
-- position, the places given, the admissions lapsed unused so far, 0/1,
-- unix ms (0: never), the draw's positions still to be written, the
-- draw's size.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local begin = tonumber(ARGV[3])
if now < begin then
  return {0, 0, 0, 0, 0, 0, 0, 0}
end
local rate, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local soldout = tonumber(ARGV[4]) <= 0
local f = redis.call('HMGET', KEYS[1], 'closed', 'early', 'next', 'frontier', 'credit', 'tick',
  'owed', 'checked', 'noshows', 'soldout', 'soldoutAt', 'placed')
local early = tonumber(f[2] or '0')
if f[1] ~= '1' then
  early = tonumber(ARGV[7])
  if early < 0 then
    early = redis.call('ZCARD', KEYS[2])
  end
  redis.call('HSET', KEYS[1], 'closed', 1, 'early', early)
end
local joined = early + tonumber(f[3] or '0')
local frontier = tonumber(f[4] or '0')
local credit = tonumber(f[5] or '0')
local last = math.max(tonumber(f[6] or '0'), begin)
local owed, checked, noshows = tonumber(f[7] or '0'), tonumber(f[8] or '0'), tonumber(f[9] or '0')
local soldoutAt = tonumber(f[11] or '0')

local placed = tonumber(f[12] or '0')
if placed < early then
  -- the draw's positions are not all written: nobody is admitted yet
  for i = 1, 5 do
    redis.call('PEXPIREAT', KEYS[i], ARGV[5])
  end
  return {0, frontier, joined, noshows, tonumber(f[10] or '0'), soldoutAt, early - placed, early}
end

-- Settle the passes whose admissions have lapsed, oldest first: each
-- place not used is a no-show, and owed one more admission (while units
-- are left: a no-show of a sold-out sale frees nothing).
local passes = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. checked, '+inf', 'LIMIT', 0, tonumber(ARGV[6]))
for _, p in ipairs(passes) do
  local from, to, at = string.match(p, '^(%d+):(%d+):(%d+)$')
  from, to, at = tonumber(from), tonumber(to), tonumber(at)
  if at + ttl > now then
    break
  end
  local missed = (to - from + 1) - redis.call('ZCOUNT', KEYS[4], from, to)
  noshows = noshows + missed
  if not soldout then
    owed = owed + missed
  end
  checked = to
end

local admit = 0
if soldout then
  credit = 0
  if soldoutAt == 0 then
    soldoutAt = now
  end
else
  credit = math.min(credit + rate * (now - last) / 1000, math.max(rate, 1))
  admit = math.min(joined - frontier, owed + math.floor(credit))
  if admit > 0 then
    local fromOwed = math.min(owed, admit)
    owed = owed - fromOwed
    credit = credit - (admit - fromOwed)
    redis.call('ZADD', KEYS[3], frontier + admit, (frontier + 1) .. ':' .. (frontier + admit) .. ':' .. now)
    frontier = frontier + admit
  end
  if frontier >= joined then
    -- nobody waits: the places owed are nobody's
    owed = 0
  end
end
redis.call('HSET', KEYS[1], 'frontier', frontier, 'credit', tostring(credit), 'tick', now, 'owed', owed,
  'checked', checked, 'noshows', noshows, 'soldout', soldout and 1 or 0, 'soldoutAt', soldoutAt)
for i = 1, 5 do
  redis.call('PEXPIREAT', KEYS[i], ARGV[5])
end
return {admit, frontier, joined, noshows, soldout and 1 or 0, soldoutAt, 0, early}
