-- issue_code.lua: makes a new login code a phone's current one, unless a
-- live code was sent to that phone less than the resend interval ago. A
-- code that was used or burned is gone, so its phone can get a new one at
-- once: burning someone's code never locks them out.
--
-- KEYS[1] -> seckill:login:{phone}  hash: code, tries (wrong guesses at
--            this code), sentAt (unix ms); expires with the code
--
-- ARGV[1] -> the new code (made by the caller from crypto/rand)
-- ARGV[2] -> the shortest wait between two live codes, milliseconds
-- ARGV[3] -> the code's lifetime, milliseconds
--
-- Returns {1, 0} issued (tries reset), or {0, ms}: a live code was sent
-- recently; ask again in ms milliseconds.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local sentAt = tonumber(redis.call('HGET', KEYS[1], 'sentAt') or '0')
local wait = sentAt + tonumber(ARGV[2]) - now
if sentAt > 0 and wait > 0 then
  return {0, wait}
end
redis.call('HSET', KEYS[1], 'code', ARGV[1], 'tries', 0, 'sentAt', now)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, 0}
