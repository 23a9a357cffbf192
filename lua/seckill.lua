-- seckill.lua: the atomic reservation shared by every Redis-backed queue.
--
-- KEYS[1] -> seckill:stock:{voucherId}   string: remaining stock
-- KEYS[2] -> seckill:window:{voucherId}  hash: begin, end (unix milliseconds)
-- KEYS[3] -> seckill:order:{voucherId}   hash: user id -> order id
-- KEYS[4] -> the queue the order is handed to: a stream (xadd), a list
--            (lpush) or a channel (publish); ignored for "none"
--
-- ARGV[1] -> user id (decimal)
-- ARGV[2] -> order id (decimal, from the ID worker)
-- ARGV[3] -> order message body (JSON, see core.EncodeOrder)
-- ARGV[4] -> handoff: "xadd", "lpush", "publish" or "none" (the caller
--            enqueues it itself, and releases the reservation if it cannot)
--
-- Returns {code, order id, receivers}:
--   {0, ARGV[2], n}       reserved and handed off; n is the number of
--                         subscribers for "publish", else 0. A replay of
--                         the same order id returns this too, without
--                         reserving or handing off twice.
--   {1, "", 0}            voucher not loaded (no stock key or no window)
--   {2, "", 0}            the sale has not started
--   {3, "", 0}            the sale has ended
--   {4, "", 0}            sold out
--   {5, existing id, 0}   the user already holds another order
--
-- Checks run in this order: loaded, replay, window, stock, one per user.
-- The replay check comes before the window and stock so that a retried
-- script (go-redis retries, AutoPipeline replays) still reports success to
-- the buyer after the stock ran out or the window closed.

local stock = redis.call('GET', KEYS[1])
if not stock then
  return {1, '', 0}
end
local window = redis.call('HMGET', KEYS[2], 'begin', 'end')
if not window[1] or not window[2] then
  return {1, '', 0}
end

local held = redis.call('HGET', KEYS[3], ARGV[1])
if held == ARGV[2] then
  return {0, held, 0}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(window[1]) then
  return {2, '', 0}
end
if now >= tonumber(window[2]) then
  return {3, '', 0}
end

if tonumber(stock) <= 0 then
  return {4, '', 0}
end
if held then
  return {5, held, 0}
end

redis.call('DECR', KEYS[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])

local receivers = 0
local handoff = ARGV[4]
if handoff == 'xadd' then
  redis.call('XADD', KEYS[4], '*', 'order', ARGV[3])
elseif handoff == 'lpush' then
  redis.call('LPUSH', KEYS[4], ARGV[3])
elseif handoff == 'publish' then
  receivers = redis.call('PUBLISH', KEYS[4], ARGV[3])
end
return {0, ARGV[2], receivers}
