-- claim_deadlines.lua: hand out the reservations due for payment, each
-- once: they are removed as they are returned, so of several instances
-- sweeping, one gets each.
--
-- KEYS[1] -> seckill:deadlines:{shard}  sorted set: 'orderId:userId:voucherId'
--            scored by when it is due (unix milliseconds)
--
-- ARGV[1] -> now, unix milliseconds on the caller's clock (the one that
--            wrote the scores and that the database's deadlines follow)
-- ARGV[2] -> the most to hand out
--
-- Returns the members due by ARGV[1], earliest first (at most ARGV[2]),
-- each followed by its score: {member, score, member, score, ...}; an
-- empty list when none is.

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
if #due > 0 then
  local members = {}
  for i = 1, #due, 2 do
    members[#members + 1] = due[i]
  end
  redis.call('ZREM', KEYS[1], unpack(members))
end
return due
