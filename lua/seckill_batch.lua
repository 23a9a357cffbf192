-- seckill_batch.lua: seckill.lua's reservation for several shoppers in one
-- call. The rules, their order and the answers are seckill.lua's (its
-- header documents them; TestRules holds both to one rule book); what a
-- batch changes is how often Redis is asked:
--
--   - Redis's clock is read once per call, and each voucher's state (its
--     stock, window and total, and where Redis may evict keys the
--     whole-check's HLEN) once per call:
--     no member of the call changes it but through this script, which
--     keeps its own count.
--   - The stock taken is counted here and written once per voucher at the
--     end (one DECRBY), the deadlines once per call (one RPUSH of them
--     all), instead of one write each per member. A script is atomic, so
--     nothing else sees the state between. The buyer marks are written as
--     each member reserves, so the same shopper twice in a call is
--     answered as two calls would be: gathering them too saved little more
--     on one hot voucher and cost more on many (as measured).
--   - A member that passes every rule but one per user (most of a sale's)
--     checks and marks its buyer in one HSETNX; only one refused, or found
--     marked, reads the mark (HGET) to answer in seckill.lua's order.
--   - A member's reservation is counted only if its hand-off succeeded: a
--     member whose hand-off fails reserves nothing (its mark is deleted;
--     in seckill.lua the stock is taken first).
--   - A member reads its shopper's limit state only while one of its
--     voucher's may be live (the window's limitsUntil, seckill.lua's
--     header): in a sale of new shoppers, none is.
--   - The Lua around the commands is written for what Redis's Lua charges
--     (the instruction counts in docs/performance.md): every value a
--     command returns is a string made and hashed in Lua, so the window's
--     total is read only where it is checked; a call to a C function
--     (tonumber, type) costs more than the arithmetic that converts a
--     number's string (s + 0); a table grown field by field is rebuilt at
--     each growth, so a voucher's state is made with all its fields; a
--     member answers with three values, not a table; and the deadline's
--     entry comes built from Go.
--
-- Each member runs under pcall: an error is that member's answer, and
-- neither undoes nor hides the others'.
--
-- KEYS[1] -> the hand-off's queue key, seckill.lua's KEYS[4]: a queue's key
--            depends on the shard alone (core.Handoff.Key), so it is the
--            same for every member and sent once
-- KEYS[2] -> the shard's deadlines list, seckill.lua's KEYS[6], also once
-- KEYS[2+4i+1 .. 2+4i+4] -> member i's (i from 0) seckill.lua KEYS[1],
--            KEYS[2], KEYS[3] and KEYS[5]: its stock, window, buyers and
--            limit keys; every key of one call carries one {shard} hash
--            tag (a member costs Redis per argument: two keys fewer each
--            measured ~5% less Redis CPU per order round 32 vouchers)
-- ARGV[1] -> n, the members
-- ARGV[2] -> h, the hand-off command's length (0: none)
-- ARGV[3] -> the shopper's limit, seckill.lua's ARGV[4], the same for every
--            member (a request the limit counted already goes in a call
--            with 0 here)
-- ARGV[4] -> 1: check each voucher's state whole (its buyers plus its
--            stock are its total, seckill.lua's answer 1 otherwise); 0:
--            every master said noeviction, so no key of it vanishes alone
--            and the HLEN per voucher is skipped (Reserver.EvictionIs)
-- ARGV[5 .. 4+h] -> the hand-off command, as seckill.lua's ARGV[8..]
-- ARGV[5+h+5i .. 9+h+5i] -> member i's ARGV[1..3] and ARGV[5] of
--            seckill.lua (shopper, order id, body, deadline), and the
--            entry seckill.lua writes to the deadlines list from its
--            ARGV[6] and [7], 'payBy:orderId:userId:voucherId' (empty:
--            no payment deadline)
--
-- Returns three values per member, in order, flat: seckill.lua's code, id,
-- n, or -1, error text, 0 for a member whose run raised an error.

local n = tonumber(ARGV[1])
local h = tonumber(ARGV[2])
local rate = tonumber(ARGV[3])
local whole = ARGV[4] == '1'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local queueKey, duesKey = KEYS[1], KEYS[2]

-- The hand-off command with its '$key' set (the queue is the same for
-- every member), and the positions of '$body', set per member.
local cmd, bodyAt, bodies = {}, {}, 0
for j = 1, h do
  local arg = ARGV[4 + j]
  cmd[j] = arg
  if arg == '$key' then
    cmd[j] = queueKey
  elseif arg == '$body' then
    bodies = bodies + 1
    bodyAt[bodies] = j
  end
end

-- vouchers[stock key]: the voucher's state as read, with what this call
-- sold of it; dues: the deadlines to push.
local vouchers, dues, nDues = {}, {}, 0

local function voucherState(stockKey, windowKey, ordersKey)
  local v = vouchers[stockKey]
  if v then
    return v
  end
  v = {sold = 0, window = windowKey, missing = false, stock = 0, begin = 0, finish = 0, limitsUntil = 0,
    limitsChanged = false, paused = false}
  local stock = redis.call('GET', stockKey)
  local window
  if whole then
    window = redis.call('HMGET', windowKey, 'begin', 'end', 'limitsUntil', 'paused', 'total')
  else
    window = redis.call('HMGET', windowKey, 'begin', 'end', 'limitsUntil', 'paused')
  end
  if not stock or not window[1] or not window[2] then
    v.missing = true
  elseif whole and window[5] and redis.call('HLEN', ordersKey) + stock ~= window[5] + 0 then
    v.missing = true -- not whole: seckill.lua's answer 1
  else
    v.stock, v.begin, v.finish = stock + 0, window[1] + 0, window[2] + 0
    v.paused = window[4] ~= false and window[4] ~= '0' -- an operator's pause (seckill.lua's header)
    -- limitsUntil (seckill.lua's header): no shopper's limit state of the
    -- voucher is live from then on, so its members need not read theirs.
    -- Absent (a window written since), it is taken as a second from now
    -- — every limit state lapses within a second of its last write — and
    -- recorded at the end of the call.
    if window[3] then
      v.limitsUntil = window[3] + 0
    else
      v.limitsUntil, v.limitsChanged = now + 1001, true
    end
  end
  vouchers[stockKey] = v
  return v
end

-- The shopper's limit: the arrival time to record if the request is
-- counted, or nil and how long to wait if it is over the limit (nil, nil:
-- no limit).
local function admit(limitKey, v)
  if rate <= 0 then
    return nil, nil
  end
  local interval = 1000 / rate
  local tat = now -- the state of a shopper with none live
  if now < v.limitsUntil then
    tat = tonumber(redis.call('GET', limitKey) or now)
  end
  if tat < now then
    tat = now
  end
  local nextTat = tat + interval
  local admitAt = nextTat - 1000 -- a burst of one second's worth
  if now < admitAt then
    return nil, math.ceil(admitAt - now)
  end
  return nextTat, nil
end

-- handOff runs the hand-off command for one order's body: its integer
-- reply (0 if none, or no hand-off), or nil and the error it raised.
local function handOff(body)
  if h == 0 then
    return 0
  end
  for b = 1, bodies do
    cmd[bodyAt[b]] = body
  end
  local reply = redis.pcall(unpack(cmd, 1, h))
  local kind = type(reply)
  if kind == 'number' then
    return reply
  end
  if kind == 'table' and reply.err then
    return nil, reply.err
  end
  return 0
end

local function reserve(i)
  local k, a = 2 + 4 * i, 4 + h + 5 * i
  local stockKey, windowKey, ordersKey, limitKey = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]
  local user, orderId, body, deadline, due = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4] + 0, ARGV[a + 5]

  local v = voucherState(stockKey, windowKey, ordersKey)
  if v.missing then
    return 1, '', 0
  end
  local limitTat, wait = admit(limitKey, v)
  if (deadline == 0 or now <= deadline) and not wait and now >= v.begin and now < v.finish and not v.paused
    and v.stock - v.sold > 0 then
    -- What most members are: a new shopper, in time, within the limit,
    -- the sale open, a unit left. One HSETNX both checks that the shopper
    -- holds no order and marks the buyer; only a member it finds marked
    -- (a replay, a buyer again) reads the mark, and every other rule's
    -- answer is the same as in seckill.lua's order, since each passed.
    if redis.call('HSETNX', ordersKey, user, orderId) == 1 then
      local receivers, err = handOff(body)
      if err then
        -- A hand-off that fails reserves nothing: the mark goes too.
        redis.call('HDEL', ordersKey, user)
        return -1, err, 0
      end
      v.sold = v.sold + 1
      if due ~= '' then
        nDues = nDues + 1
        dues[nDues] = due
      end
      return 0, orderId, receivers
    end
  end
  local held = redis.call('HGET', ordersKey, user)
  if held == orderId then
    -- Rewritten, as seckill.lua does, so that a WAIT confirms it too.
    redis.call('HSET', ordersKey, user, held)
    return 0, held, -1
  end
  if deadline > 0 and now > deadline then
    return 7, '', now - deadline
  end
  if wait then
    return 6, '', wait
  end
  local code, id, value
  if now < v.begin then
    code, id, value = 2, '', v.begin - now
  elseif now >= v.finish then
    code, id, value = 3, '', now - v.finish
  elseif v.paused then
    code, id, value = 8, '', 0
  elseif held then
    code, id, value = 5, held, 0
  else
    code, id, value = 4, '', 0 -- every other rule passed, so no unit was left
  end
  if limitTat then
    redis.call('SET', limitKey, limitTat, 'PX', math.ceil(limitTat - now))
    if limitTat > v.limitsUntil then
      v.limitsUntil, v.limitsChanged = limitTat, true
    end
  end
  return code, id, value
end

-- One flat array, three values a member: Redis converts each table of a
-- reply looking for its special fields (err, ok, double, map, …), which
-- cost more per member than the values (as measured).
local out = {}
for i = 0, n - 1 do
  local ok, code, id, value = pcall(reserve, i)
  if not ok then
    -- code is what the member raised: an error reply of redis.call, or Lua's
    if type(code) == 'table' and code.err then
      code, id, value = -1, code.err, 0
    else
      code, id, value = -1, tostring(code), 0
    end
  end
  out[3 * i + 1], out[3 * i + 2], out[3 * i + 3] = code, id, value
end

for stockKey, v in pairs(vouchers) do
  if v.sold > 0 then
    redis.call('DECRBY', stockKey, v.sold)
  end
  if v.limitsChanged then
    redis.call('HSET', v.window, 'limitsUntil', v.limitsUntil)
  end
end
if nDues > 0 then
  redis.call('RPUSH', duesKey, unpack(dues))
end
return out
