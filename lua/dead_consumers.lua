-- dead_consumers.lua: names the group's consumers that hold pending
-- entries and whose process has stopped beating (consumer_beat.lua): its
-- time in the alive hash has passed. A consumer whose process never beat
-- (an older version) is not named: the claim idle time covers it. A
-- process whose beat has passed and whose consumers hold nothing is
-- dropped from the hash (it beats again if it was only cut off).
--
-- KEYS[1] -> the stream
-- KEYS[2] -> <stream>:alive  hash (see consumer_beat.lua)
--
-- ARGV[1] -> the group
--
-- Returns the names of the dead consumers holding entries; an empty list
-- when there is none (or the stream or group is missing).

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {}
end
local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if not ok then
  return {} -- NOGROUP: the queue recreates its group on its own
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local alive = {}
local flat = redis.call('HGETALL', KEYS[2])
for i = 1, #flat, 2 do
  alive[flat[i]] = tonumber(flat[i + 1])
end
local dead, holding = {}, {}
for _, c in ipairs(consumers) do
  local fields = {}
  for i = 1, #c, 2 do
    fields[c[i]] = c[i + 1]
  end
  local prefix = string.match(fields['name'], '^(.*)%-[^%-]*$')
  local untilMs = prefix and alive[prefix]
  if untilMs and tonumber(fields['pending']) > 0 then
    holding[prefix] = true
    if untilMs < now then
      dead[#dead + 1] = fields['name']
    end
  end
end
for prefix, untilMs in pairs(alive) do
  if untilMs < now and not holding[prefix] then
    redis.call('HDEL', KEYS[2], prefix)
  end
end
return dead
