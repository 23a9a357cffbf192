-- reclaim_list.lua: return a dead consumer's processing list to the queue
-- (reliable list mode). A consumer is dead when its heartbeat key expired.
--
-- KEYS[1] -> seckill:orders:list:alive:<consumer>       string with a TTL: the heartbeat
-- KEYS[2] -> seckill:orders:list:processing:<consumer>  list: what it took and did not ack
-- KEYS[3] -> seckill:orders:list                        list: the queue (consumed from the right)
-- KEYS[4] -> seckill:orders:list:consumers              set: consumers to watch
-- KEYS[5] -> seckill:orders:list:attempts               hash: message -> redeliveries
--
-- ARGV[1] -> the consumer's name
-- ARGV[2] -> "1" to reclaim even if the heartbeat is alive: a consumer
--            restarted under its old name takes back its own list at once
--
-- Returns:
--   -1  the consumer is alive: nothing moved
--   n   n messages moved back (n >= 0), the consumer forgotten
--
-- Messages go back to the consuming end, oldest last-in so it is taken
-- first, and each one's redelivery count goes up by one.

if ARGV[2] ~= '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
local n = 0
while true do
  local msg = redis.call('LMOVE', KEYS[2], KEYS[3], 'LEFT', 'RIGHT')
  if not msg then
    break
  end
  redis.call('HINCRBY', KEYS[5], msg, 1)
  n = n + 1
end
redis.call('SREM', KEYS[4], ARGV[1])
return n
