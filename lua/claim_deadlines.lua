-- claim_deadlines.lua: hand out the reservations due for payment, each
-- once: they are removed as they are returned, so of several instances
-- sweeping, one gets each.
--
-- KEYS[1] -> seckill:payby:{shard}  list: the shard's reservations in the
--            order the reservation script made them, each
--            'payBy:orderId:userId:voucherId', payBy the unix milliseconds
--            at which it is due for payment
-- KEYS[2] -> seckill:deadlines:{shard}  sorted set: the same reservations
--            as earlier versions recorded them ('orderId:userId:voucherId'
--            scored by payBy), drained here until it is gone
--
-- ARGV[1] -> now, unix milliseconds on the caller's clock (the one that
--            wrote the deadlines and that the database's deadlines follow)
-- ARGV[2] -> the most to hand out
--
-- Returns the reservations due by ARGV[1] (at most ARGV[2]), each as
-- 'orderId:userId:voucherId' followed by its payBy: {member, payBy, ...};
-- an empty list when none is.
--
-- The list is in reservation order, and so nearly in payBy order: every
-- instance adds one pay window to its own clock. Only the first ARGV[2]
-- entries are looked at, every due one among them is handed out (not
-- only a due run at the head), so an entry is held back only by as many
-- not yet due ahead of it — written by an instance whose clock or pay
-- window is ahead of the others' — and then by at most that difference;
-- the database's sweep is the safety net for persisted orders anyway. An
-- entry that does not parse is dropped, never handed out.

local now = tonumber(ARGV[1])
local max = tonumber(ARGV[2])
local out = {}

local legacy = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'WITHSCORES', 'LIMIT', 0, max)
if #legacy > 0 then
  local members = {}
  for i = 1, #legacy, 2 do
    members[#members + 1] = legacy[i]
    out[#out + 1] = legacy[i]
    out[#out + 1] = legacy[i + 1]
  end
  redis.call('ZREM', KEYS[2], unpack(members))
  max = max - #members
end
if max <= 0 then
  return out
end

local entries = redis.call('LRANGE', KEYS[1], 0, max - 1)
local head = 0   -- the leading run taken: trimmed off
local marked = 0 -- taken behind an entry not yet due: blanked, then removed
for i, e in ipairs(entries) do
  local payBy, member = string.match(e, '^(%d+):(%d+:%d+:%d+)$')
  local take = not payBy or tonumber(payBy) <= now
  if take then
    if payBy then
      out[#out + 1] = member
      out[#out + 1] = payBy
    end
    if head == i - 1 then
      head = i
    else
      redis.call('LSET', KEYS[1], i - 1, '')
      marked = marked + 1
    end
  end
end
if marked > 0 then
  -- Every blank lies within the first max entries: LREM stops at the last.
  redis.call('LREM', KEYS[1], marked, '')
end
if head > 0 then
  redis.call('LTRIM', KEYS[1], head, -1)
end
return out
