-- consumer_beat.lua: a process's heartbeat on one stream. Its consumers
-- (named <prefix>-<n>, and <prefix>-claimed) count as alive until the time
-- it writes, on Redis's clock; a process that stops beating (killed, cut
-- off) is dead once that time has passed, and the others take over what
-- its consumers held (dead_consumers.lua) without waiting for the claim
-- idle time.
--
-- KEYS[1] -> <stream>:alive  hash: consumer-name prefix -> unix ms until
--            which that process is alive (shares the stream's hash tag)
--
-- ARGV[1] -> the process's consumer-name prefix
-- ARGV[2] -> how long it is alive without another beat, milliseconds
--
-- Returns 1.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], now + tonumber(ARGV[2]))
-- A deployment that stops leaves nothing behind for long.
redis.call('PEXPIRE', KEYS[1], 86400000)
return 1
