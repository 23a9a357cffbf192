-- move_voucher.lua: moves one voucher's keys (or one bucket's, of a voucher
-- in buckets) from an earlier key layout to the current one (a new number
-- of shards, or the layout before shards), all at once, so no reservation
-- sees half a voucher. Only on one Redis: on a cluster the two layouts'
-- keys lie in different slots.
--
-- KEYS[1] -> stock key in the old layout    string: remaining stock
-- KEYS[2] -> window key in the old layout   hash: begin, end
-- KEYS[3] -> order key in the old layout    hash: user id -> order id
-- KEYS[4] -> transfers key in the old layout  hash: the bucket's transfers
--            (bucket_pend.lua; a whole voucher has none)
-- KEYS[5] -> stock key in the new layout
-- KEYS[6] -> window key in the new layout
-- KEYS[7] -> order key in the new layout
-- KEYS[8] -> transfers key in the new layout
--
-- ARGV: none
--
-- Returns:
--   1   moved
--   0   nothing to move: the old stock key is gone (moved already), so
--       running it twice is harmless
--   an error when both layouts hold the voucher: which one is right is
--   for an operator to say, and nothing is touched

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if redis.call('EXISTS', KEYS[5]) == 1 then
  return redis.error_reply('both layouts hold this voucher: ' .. KEYS[1] .. ' and ' .. KEYS[5])
end
redis.call('RENAME', KEYS[1], KEYS[5])
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('RENAME', KEYS[2], KEYS[6])
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('RENAME', KEYS[3], KEYS[7])
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('RENAME', KEYS[4], KEYS[8])
end
return 1
