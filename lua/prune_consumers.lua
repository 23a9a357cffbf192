-- prune_consumers.lua: remove the consumers of a group that hold nothing
-- and have not been seen for a while — the names of processes that are
-- gone (a deployment that rolls pods leaves one per pod, for ever). The
-- check and the removal are one step: no XREADGROUP can hand a pruned
-- consumer an entry in between, and one that reads again later is simply
-- created anew.
--
-- KEYS[1] -> the stream
-- KEYS[2] -> <stream>:alive  hash: a consumer whose process beats
--            (consumer_beat.lua) is alive whatever its idle time: Redis
--            7.0 does not count a blocking read that returns nothing as
--            a consumer's interaction, so a live consumer of a quiet
--            stream looks idle
--
-- ARGV[1] -> the group
-- ARGV[2] -> idle for more than this (milliseconds) to be pruned: the
--            claim time, past which the group presumes a consumer dead
--
-- Returns the names removed; an empty list when none was (or the stream
-- or group is missing).

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {}
end
local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if not ok then
  return {} -- NOGROUP: the queue recreates its group on its own
end
local minIdle = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local removed = {}
for _, c in ipairs(consumers) do
  local fields = {}
  for i = 1, #c, 2 do
    fields[c[i]] = c[i + 1]
  end
  -- An idle time that is not known (-1 on a stand-in) is never old enough.
  local idle = tonumber(fields['idle'])
  local prefix = string.match(fields['name'], '^(.*)%-[^%-]*$')
  local untilMs = prefix and tonumber(redis.call('HGET', KEYS[2], prefix) or '0') or 0
  if tonumber(fields['pending']) == 0 and idle ~= nil and idle > minIdle and untilMs < now then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], fields['name'])
    removed[#removed + 1] = fields['name']
  end
end
return removed
