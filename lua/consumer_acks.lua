-- consumer_acks.lua: the instances whose consumers were heard from lately,
-- and the version each runs; the ones not heard from in a minute are
-- forgotten (a stopped instance).
--
-- KEYS[1] -> {prefix}consumers:acks   hash: instance -> "version:ms"
--
-- ARGV[1] -> how recent (ms) a heartbeat must be to be listed
--
-- Returns: a flat list instance, version, instance, version, ...

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local recent = tonumber(ARGV[1])
local out = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local version, ms = string.match(all[i + 1], '^(%-?%d+):(%d+)$')
  local age = version and now - tonumber(ms) or 60001
  if age > 60000 then
    redis.call('HDEL', KEYS[1], all[i])
  elseif age <= recent then
    out[#out + 1] = all[i]
    out[#out + 1] = version
  end
end
return out
