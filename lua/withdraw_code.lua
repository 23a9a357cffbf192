-- withdraw_code.lua: takes back a code that could not be delivered, so the
-- shopper may ask again at once instead of waiting out the resend interval
-- for a code that never reached them. Only that code: one issued since is
-- left alone.
--
-- KEYS[1] -> seckill:login:{phone}  hash (see issue_code.lua)
--
-- ARGV[1] -> the code to withdraw
--
-- Returns 1 withdrawn, 0 the phone's code is another one (or none).

if redis.call('HGET', KEYS[1], 'code') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
