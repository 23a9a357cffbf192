-- steer_window.lua: an operator's change of a voucher's sale, written
-- where the reservation reads it (seckill.lua's window hash): its begin,
-- its end and its pause, in one step. The database has the change first
-- (core/steer); this makes the live state say the same.
--
-- KEYS[1] -> seckill:window:{shard}:voucherId   hash: begin, end, paused,
--            and a rebuild's fence (fence_voucher.lua)
--
-- ARGV[1] -> begin (unix ms)
-- ARGV[2] -> end (unix ms)
-- ARGV[3] -> paused ('0' on sale, '1' by an operator, '2' the kill switch)
-- ARGV[4] -> '1': the sale ends now, by Redis's clock (the end is the
--            earlier of ARGV[2] and now), so that no reservation this
--            Redis runs after this call sells, whatever this server's
--            clock says; '0': ARGV[2] as it is
--
-- Returns:
--   1   written
--   0   the voucher has no live state here (never loaded, or forgotten):
--       nothing to write, the load or the rebuild reads the database
--  -1   a rebuild holds the voucher's fence: nothing written, since the
--       restore may write what the rebuild read before the change; the
--       caller asks again once the fence is lifted

local w = redis.call('HMGET', KEYS[1], 'begin', 'fence', 'fenceUntil')
if not w[1] then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if w[2] and tonumber(w[3]) > now then
  return -1
end
local finish = tonumber(ARGV[2])
if ARGV[4] == '1' and now < finish then
  finish = now
end
redis.call('HSET', KEYS[1], 'begin', ARGV[1], 'end', finish, 'paused', ARGV[3])
return 1
