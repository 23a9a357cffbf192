-- seckill_batch.lua: seckill.lua for several shoppers in one call, so that
-- Redis parses, looks up and sets up one script for a batch instead of one
-- per shopper. Each member runs seckill.lua's body (inlined below as
-- reserve, by the lua package), in the order given, under redis.pcall's Lua
-- counterpart: an error in one member is that member's answer, and
-- neither undoes nor hides the others'. Redis's clock is read once, for
-- the whole call: every member runs within the call's few milliseconds.
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
batchClock = redis.call('TIME')
-- One KEYS and one ARGV table for every member, refilled in place rather
-- than built anew (reserve keeps no reference to either): the tables were
-- a tenth of a batch's cost. The hand-off command is the same for all.
local keys, argv = {}, {}
for j = 1, h do
  argv[7 + j] = ARGV[2 + j]
end
local out = {}
for i = 0, n - 1 do
  local k = 6 * i
  keys[1], keys[2], keys[3], keys[4], keys[5], keys[6] = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], KEYS[k + 6]
  local a = 2 + h + 7 * i
  argv[1], argv[2], argv[3], argv[4], argv[5], argv[6], argv[7] = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7]
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
