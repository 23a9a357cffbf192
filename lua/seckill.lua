-- seckill.lua: the atomic reservation shared by every Redis-backed queue.
-- It knows no queue: the adapter's hand-off (core.Handoff) comes in ARGV
-- and is run as given, right after the stock is taken.
--
-- KEYS[1] -> seckill:stock:{shard}:voucherId   string: remaining stock
-- KEYS[2] -> seckill:window:{shard}:voucherId  hash: begin, end (unix
--            milliseconds), total: the units on sale (absent in state
--            written before it was kept), limitsUntil: the time (unix ms,
--            Redis's clock) from which no shopper's limit state of the
--            voucher (KEYS[5] of any shopper) is live. Every script that
--            writes a limit state raises it to cover it (an absent one is
--            taken as a second from now: a state lapses within a second of
--            its last write), so seckill_batch.lua reads a shopper's state
--            only before it: in a sale of new shoppers, never; paused: an
--            operator's pause ('1', '2' the kill switch's; absent or '0':
--            on sale), written by steer_window.lua
-- KEYS[3] -> seckill:order:{shard}:voucherId   hash: user id -> order id
-- KEYS[4] -> the queue key the hand-off writes (core.Handoff.Key), which
--            carries the same {shard} tag; without a hand-off, any key of
--            the voucher (it is not touched)
-- KEYS[5] -> seckill:limit:{shard}:voucherId:userId  string: the shopper's
--            rate-limit state for the voucher (GCRA's theoretical arrival
--            time, unix milliseconds), expiring when it no longer matters
-- KEYS[6] -> seckill:payby:{shard}  list: each reservation of the shard's
--            vouchers, 'payBy:orderId:userId:voucherId', payBy the unix
--            milliseconds at which it is due for payment, in the order made
--            (claim_deadlines.lua hands them out when due)
-- {shard} is the hash tag of the voucher's shard (core.Shards), so every
-- key of one call lies in one cluster slot.
--
-- ARGV[1] -> user id (decimal)
-- ARGV[2] -> order id (decimal, from the ID worker)
-- ARGV[3] -> order message body (core.OrderBody: JSON or compact)
-- ARGV[4] -> seckill requests admitted per second per shopper and voucher,
--            with a burst of as many (0: no limit)
-- ARGV[5] -> deadline: the request's deadline, unix milliseconds on
--            Redis's clock as the caller estimates it (redisclock: an
--            instance whose own clock is off still agrees) (0: none); a
--            script that runs after it (the
--            request timed out and went on waiting in Redis's queue, or a
--            client retried it) reserves nothing
-- ARGV[6] -> when the reservation is due for payment, unix milliseconds on
--            the caller's clock, as the database will record it (0: no
--            deadline is recorded)
-- ARGV[7] -> voucher id (decimal), for the deadline's member
-- ARGV[8..] -> the hand-off command and its arguments, '$key' standing for
--            KEYS[4] and '$body' for ARGV[3] (core.HandoffKey, HandoffBody);
--            none: the caller enqueues the order itself, and releases the
--            reservation if it cannot
--
-- Returns {code, order id, receivers}:
--   {0, ARGV[2], n}       reserved and handed off; n is the hand-off
--                         command's integer reply (PUBLISH: subscribers
--                         reached), 0 if it has none.
--   {0, ARGV[2], -1}      a replay of the same order id: already reserved
--                         and handed off, nothing done twice
--   {1, "", 0}            voucher not loaded (no stock key or no window),
--                         or not whole: buyers + stock left != total (a key
--                         evicted): the caller rebuilds it
--   {2, "", ms}           the sale has not started; it opens in ms
--                         milliseconds (this server's clock)
--   {3, "", ms}           the sale has ended, ms milliseconds ago
--   {4, "", 0}            sold out
--   {5, existing id, 0}   the user already holds another order
--   {6, "", ms}           over the rate limit: retry after ms milliseconds
--   {7, "", ms}           the request's deadline passed ms milliseconds ago:
--                         nothing reserved
--   {8, "", 0}            an operator paused the sale
--
-- Checks run in this order: loaded, replay, deadline, rate limit, window,
-- paused, one per user, stock. The limit counts every request that gets that far
-- and is refused; a reservation is not counted, because it marks the
-- shopper as a buyer, whose every later request is refused (already
-- purchased) all the same: writing its limit state (a key per new shopper
-- and voucher, the costliest step of a sale where most requests are new
-- pairs) could change no answer but 409 into 429, one request sooner.
-- The replay check comes before the window and stock so that a retried
-- script (go-redis retries, AutoPipeline replays) still reports success to
-- the buyer after the stock ran out or the window closed.

local stock = redis.call('GET', KEYS[1])
if not stock then
  return {1, '', 0}
end
local window = redis.call('HMGET', KEYS[2], 'begin', 'end', 'total', 'limitsUntil', 'paused')
if not window[1] or not window[2] then
  return {1, '', 0}
end
-- Every unit is either left or a buyer's: a Redis that evicted the buyers
-- hash (or part of the state) must not sell to those buyers again.
if window[3] and redis.call('HLEN', KEYS[3]) + tonumber(stock) ~= tonumber(window[3]) then
  return {1, '', 0}
end

local held = redis.call('HGET', KEYS[3], ARGV[1])
if held == ARGV[2] then
  -- Rewritten as it is, so that the replay leaves a write behind: a WAIT
  -- that follows it (the replica-confirmed mode) then confirms the
  -- original reservation too, which came before it.
  redis.call('HSET', KEYS[3], ARGV[1], held)
  return {0, held, -1}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local deadline = tonumber(ARGV[5])
if deadline > 0 and now > deadline then
  return {7, '', now - deadline}
end

-- The limit, GCRA as go-redis/redis_rate keeps it, in this script so that
-- a seckill is one round trip, and under the voucher's hash tag so that it
-- runs on a cluster: hence per shopper and voucher.
local rate = tonumber(ARGV[4])
local limitTat -- the limit state to keep if the request is refused
if rate > 0 then
  local interval = 1000 / rate
  local tat = tonumber(redis.call('GET', KEYS[5]) or now)
  if tat < now then
    tat = now
  end
  local nextTat = tat + interval
  local admitAt = nextTat - 1000 -- a burst of one second's worth
  if now < admitAt then
    return {6, '', math.ceil(admitAt - now)}
  end
  limitTat = nextTat
end
-- refuse answers reply to an admitted request that reserves nothing, and
-- counts it against the shopper's limit.
local function refuse(reply)
  if limitTat then
    redis.call('SET', KEYS[5], limitTat, 'PX', math.ceil(limitTat - now))
    -- The window's limitsUntil covers it (absent: taken as a second from
    -- now, when every state written before has lapsed).
    local limitsUntil = tonumber(window[4]) or (now + 1001)
    if not window[4] or limitTat > limitsUntil then
      redis.call('HSET', KEYS[2], 'limitsUntil', math.max(limitsUntil, limitTat))
    end
  end
  return reply
end

if now < tonumber(window[1]) then
  return refuse({2, '', tonumber(window[1]) - now})
end
if now >= tonumber(window[2]) then
  return refuse({3, '', now - tonumber(window[2])})
end
if window[5] and window[5] ~= '0' then
  return refuse({8, '', 0})
end

-- The buyer before the stock: a shopper who holds an order learns its id
-- (a retry after a timed-out answer, say), never "sold out".
if held then
  return refuse({5, held, 0})
end
if tonumber(stock) <= 0 then
  return refuse({4, '', 0})
end

redis.call('DECR', KEYS[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
local payBy = tonumber(ARGV[6])
if payBy > 0 then
  -- Due for payment: the expiry claims it then, queued or persisted.
  -- A list, not a sorted set scored by payBy: the deadlines arrive in
  -- nearly their own order, and RPUSH costs Redis a fraction of a ZADD
  -- into a large sorted set (~1.5 µs of ~20 per order, measured).
  redis.call('RPUSH', KEYS[6], ARGV[6] .. ':' .. ARGV[2] .. ':' .. ARGV[1] .. ':' .. ARGV[7])
end

local receivers = 0
if #ARGV >= 8 then
  local cmd = {}
  for i = 8, #ARGV do
    local arg = ARGV[i]
    if arg == '$key' then
      arg = KEYS[4]
    elseif arg == '$body' then
      arg = ARGV[3]
    end
    cmd[i - 7] = arg
  end
  local reply = redis.call(unpack(cmd))
  if type(reply) == 'number' then
    receivers = reply
  end
end
return {0, ARGV[2], receivers}
