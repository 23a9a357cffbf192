-- withdraw_code.lua: takes back a code that could not be delivered: the
-- code is gone, and it no longer counts against the phone's or the
-- address's budget (no message reached the phone), so the shopper may ask
-- again at once.
--
-- KEYS[1] -> seckill:login:{phone}:issued  sorted set (see issue_code.lua)
-- KEYS[2] -> seckill:login:{phone}:code:<challenge>  hash
-- KEYS[3] -> seckill:login:{phone}:issued:<address>  sorted set
--
-- ARGV[1] -> the code's challenge
--
-- Returns 1 withdrawn, 0 there was no such code (used, burned or expired).

local had = redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return had
