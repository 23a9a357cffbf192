-- seckill_batch.lua: seckill.lua for several shoppers in one call, so that
-- Redis parses, looks up and sets up one script for a batch instead of one
-- per shopper. Each member runs seckill.lua's body, unchanged (inlined
-- below as reserve, by the lua package), in the order given, under
-- redis.pcall's Lua counterpart: an error in one member is that member's
-- answer, and neither undoes nor hides the others'.
--
-- KEYS[1] .. KEYS[6] -> the first member's KEYS[1..6] of seckill.lua, and
--            KEYS[6i+1 .. 6i+6] member i's (i from 0); every key of one
--            call carries one {shard} hash tag
-- ARGV[1] -> n, the members
-- ARGV[2] -> h, the hand-off command's length (0: none)
-- ARGV[3 .. 2+h] -> the hand-off command, as seckill.lua's ARGV[8..]
-- ARGV[3+h+7i .. 9+h+7i] -> member i's ARGV[1..7] of seckill.lua
--
-- Returns one reply per member, in order: seckill.lua's {code, id, n}, or
-- {-1, error text, 0} for a member whose run raised an error.

local n = tonumber(ARGV[1])
local h = tonumber(ARGV[2])
local out = {}
for i = 0, n - 1 do
  local keys = {KEYS[6 * i + 1], KEYS[6 * i + 2], KEYS[6 * i + 3], KEYS[6 * i + 4], KEYS[6 * i + 5], KEYS[6 * i + 6]}
  local base = 2 + h + 7 * i
  local argv = {}
  for j = 1, 7 do
    argv[j] = ARGV[base + j]
  end
  for j = 1, h do
    argv[7 + j] = ARGV[2 + j]
  end
  local ok, reply = pcall(reserve, keys, argv)
  if ok then
    out[i + 1] = reply
  elseif type(reply) == 'table' and reply.err then
    out[i + 1] = {-1, reply.err, 0} -- an error reply of redis.call
  else
    out[i + 1] = {-1, tostring(reply), 0}
  end
end
return out
