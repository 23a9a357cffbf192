-- consumer_ack.lua: an instance says which version of the operator's
-- setting its consumers run, stamped with Redis's clock (one clock for
-- every instance's heartbeat, whatever theirs say).
--
-- KEYS[1] -> {prefix}consumers:acks   hash: instance -> "version:ms"
--
-- ARGV[1] -> the instance's name
-- ARGV[2] -> the version it runs
--
-- Returns: 1

local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. ms)
return 1
