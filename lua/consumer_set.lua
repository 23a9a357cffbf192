-- consumer_set.lua: write the operator's setting of the consumers, unless
-- a later one is there already. The operator's action and an instance
-- restoring the setting from the database after Redis lost it may race;
-- the version (the database's count of changes) decides, so a restore
-- read before an action never undoes it.
--
-- KEYS[1] -> {prefix}consumers   hash: paused (0/1), rate (orders a second
--            in all, 0: no cap), version
--
-- ARGV[1] -> paused (0 or 1)
-- ARGV[2] -> rate
-- ARGV[3] -> version
--
-- Returns:
--   1  written
--   0  a version as late or later is there: nothing changed

local have = tonumber(redis.call('HGET', KEYS[1], 'version') or '-1')
if have >= tonumber(ARGV[3]) then
  return 0
end
redis.call('HSET', KEYS[1], 'paused', ARGV[1], 'rate', ARGV[2], 'version', ARGV[3])
return 1
