-- admit.lua: the shopper's seckill limit alone, for a request that must
-- look something up before it can run seckill.lua (a voucher not yet
-- verified on this instance: unknown, or forgotten by Redis). It is the
-- same GCRA on the same key as seckill.lua's, so the two count against one
-- limit; the limit then holds before any look-up.
--
-- KEYS[1] -> seckill:limit:{shard}:voucherId:userId  string: GCRA's
--            theoretical arrival time, unix milliseconds
-- KEYS[2] -> seckill:window:{shard}:voucherId  hash: its limitsUntil is
--            raised to cover the state written (seckill.lua's header), if
--            the voucher has a window yet (one written later takes its
--            limitsUntil as a second from then, which covers it)
--
-- ARGV[1] -> requests admitted per second per shopper and voucher, with a
--            burst of as many (0: admit everything, touch nothing)
--
-- Returns {0, 0} admitted (and counted), or {6, ms}: over the limit, retry
-- after ms milliseconds (seckill.lua's code 6).

local rate = tonumber(ARGV[1])
if rate <= 0 then
  return {0, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = 1000 / rate
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then
  tat = now
end
local nextTat = tat + interval
local admitAt = nextTat - 1000 -- a burst of one second's worth
if now < admitAt then
  return {6, math.ceil(admitAt - now)}
end
redis.call('SET', KEYS[1], nextTat, 'PX', math.ceil(nextTat - now))
local w = redis.call('HMGET', KEYS[2], 'begin', 'limitsUntil')
if w[1] then
  local limitsUntil = tonumber(w[2]) or (now + 1001)
  if not w[2] or nextTat > limitsUntil then
    redis.call('HSET', KEYS[2], 'limitsUntil', math.max(limitsUntil, nextTat))
  end
end
return {0, 0}
