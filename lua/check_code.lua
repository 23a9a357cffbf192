-- check_code.lua: judges one guess at the login code of one challenge.
-- Compare, count and burn are one atomic step, so parallel guesses are
-- judged one after another: at most the allowed number of them is ever
-- compared, and the right code after the last wrong one finds the code
-- already gone. Only guesses sent with this challenge reach this code:
-- guesses on another challenge (an attacker's own) never burn it.
--
-- KEYS[1] -> seckill:login:{phone}:code:<challenge>  hash: code, tries
--            (see issue_code.lua)
--
-- ARGV[1] -> the guess
-- ARGV[2] -> wrong guesses that burn the code
--
-- Returns {1, 0}: right; the code is used up (deleted).
--         {0, n}: wrong; n guesses are left.
--         {-1, 0}: wrong, and that was the last guess: the code is burned.
--         {-2, 0}: no code to judge (never issued, expired, used or
--                  burned); nothing is counted.

local code = redis.call('HGET', KEYS[1], 'code')
if not code then
  return {-2, 0}
end
-- Lua interns its strings: == compares references, not bytes one by one,
-- so its time tells nothing about how much of the guess was right.
if code == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {1, 0}
end
local tries = redis.call('HINCRBY', KEYS[1], 'tries', 1)
local max = tonumber(ARGV[2])
if tries >= max then
  redis.call('DEL', KEYS[1])
  return {-1, 0}
end
return {0, max - tries}
