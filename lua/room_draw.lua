-- room_draw.lua: the early joiners' draw keys, in ascending order (their
-- places), once the sale has begun by Redis's clock: from then on no join
-- enters the draw, so the list is final.
--
-- KEYS[1] -> seckill:room:{shard}:voucherId  hash: the room's state
--            (closed: the early set is final)
-- KEYS[2] -> seckill:room:{shard}:voucherId:early  sorted set: the draw,
--            "<draw key>:<user id>"
--
-- ARGV[1] -> the sale's begin, unix ms
--
-- Returns {0}: not drawn yet; {1, member, member, ...}: the draw in order,
-- each "<draw key>:<user id>" (the ids are the server's, never published).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(ARGV[1]) and redis.call('HGET', KEYS[1], 'closed') ~= '1' then
  return {0}
end
local members = redis.call('ZRANGE', KEYS[2], 0, -1)
table.insert(members, 1, 1)
return members
