#!lua flags=allow-oom
-- fetch_list_oom.lua: a reliable list consumer's fetch while Redis is out
-- of memory (maxmemory reached under noeviction), when Redis refuses the
-- usual one: its heartbeat's SET, the SADD that registers it and BLMOVE
-- are all commands that may grow memory. Nothing here grows Redis by more
-- than a processing list's header — the heartbeat overwrites itself, the
-- name is a member already, a message moves from one list to another —
-- and it is how the queue drains, freeing what it holds, when Redis is
-- full; so the script is allowed out of memory (the allow-oom flag). Not
-- blocking: the consumer waits a moment itself when nothing moved.
--
-- KEYS[1] -> seckill:orders:list:alive:<consumer>       string with a TTL: the heartbeat
-- KEYS[2] -> seckill:orders:list:processing:<consumer>  list: what it took and did not ack
-- KEYS[3] -> seckill:orders:list                        list: the queue (consumed from the right)
-- KEYS[4] -> seckill:orders:list:consumers              set: consumers the reapers watch
--
-- ARGV[1] -> the consumer's name
-- ARGV[2] -> the heartbeat's TTL, ms
-- ARGV[3] -> the most messages to move
-- ARGV[4] -> now, ms (the heartbeat's value)
--
-- Returns the messages moved, in the order they were taken (none: an
-- empty queue).

redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[2])
redis.call('SADD', KEYS[4], ARGV[1])
local moved = {}
for _ = 1, tonumber(ARGV[3]) do
  local msg = redis.call('LMOVE', KEYS[3], KEYS[2], 'RIGHT', 'LEFT')
  if not msg then
    break
  end
  moved[#moved + 1] = msg
end
return moved
