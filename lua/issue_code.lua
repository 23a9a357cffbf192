-- issue_code.lua: issues a login code under its own challenge, unless the
-- phone has had its budget of codes in the rolling window. Codes of one
-- phone coexist: a new one never replaces or invalidates an earlier one, so
-- nobody can lock a phone out by asking for codes; the budget bounds what
-- anyone gets however many addresses they ask from (and the SMS sent).
--
-- KEYS[1] -> seckill:login:{phone}:issued  sorted set: challenge -> the
--            unix ms it was issued at; expires with the window
-- KEYS[2] -> seckill:login:{phone}:code:<challenge>  hash: code, tries
--            (wrong guesses at this code); expires with the code
--
-- ARGV[1] -> the new code (made by the caller from crypto/rand)
-- ARGV[2] -> the challenge (made by the caller from crypto/rand)
-- ARGV[3] -> codes a phone may be issued in the window
-- ARGV[4] -> the window, milliseconds
-- ARGV[5] -> the code's lifetime, milliseconds
--
-- Returns {1, 0} issued, or {0, ms}: the budget is spent; the oldest code
-- of the window leaves it in ms milliseconds.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, math.max(1, tonumber(oldest[2]) + window - now)}
end
redis.call('ZADD', KEYS[1], now, ARGV[2])
redis.call('PEXPIRE', KEYS[1], window)
redis.call('HSET', KEYS[2], 'code', ARGV[1], 'tries', 0)
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return {1, 0}
