-- issue_code.lua: issues a login code under its own challenge, unless the
-- asking address has had its budget of codes for the phone in the rolling
-- window. Codes of one phone coexist: a new one never replaces or
-- invalidates an earlier one. The budget is each address's own, so nobody
-- can spend another's and lock a phone out by asking for its codes (the
-- review's five requests from anywhere did, every 15 minutes); what bounds
-- the guesses instead is the code's length: the first codes of a phone in
-- the window are short, and once it has had that many (someone is asking
-- for its codes from several addresses) each further one is long, so the
-- phone's owner still gets a code and logs in, and an attacker's guesses
-- at the long ones count for nothing.
--
-- KEYS[1] -> seckill:login:{phone}:issued  sorted set: challenge -> the
--            unix ms it was issued at, every address's; expires with the
--            window
-- KEYS[2] -> seckill:login:{phone}:code:<challenge>  hash: code, tries
--            (wrong guesses at this code); expires with the code
-- KEYS[3] -> seckill:login:{phone}:issued:<address>  sorted set: the same,
--            the asking address's alone
--
-- ARGV[1] -> the short code (made by the caller from crypto/rand)
-- ARGV[2] -> the long code (likewise)
-- ARGV[3] -> the challenge (made by the caller from crypto/rand)
-- ARGV[4] -> codes one address may be issued for the phone in the window
-- ARGV[5] -> the window, milliseconds
-- ARGV[6] -> the code's lifetime, milliseconds
-- ARGV[7] -> the phone's short codes in the window; past them, long ones
--
-- Returns {1, 0, 1} issued the short code, {1, 0, 2} issued the long one,
-- or {0, ms, 0}: the address's budget is spent; its oldest code of the
-- window leaves it in ms milliseconds.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - window)
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[4]) then
  local oldest = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  return {0, math.max(1, tonumber(oldest[2]) + window - now), 0}
end
local kind, code = 1, ARGV[1]
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[7]) then
  kind, code = 2, ARGV[2]
end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], window)
redis.call('ZADD', KEYS[3], now, ARGV[3])
redis.call('PEXPIRE', KEYS[3], window)
redis.call('HSET', KEYS[2], 'code', code, 'tries', 0)
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return {1, 0, kind}
