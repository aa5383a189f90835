-- Take the lead when nobody holds it. The lease's value is a fencing token (a number from KEYS[2]
-- that only grows) and the holder's name (`bot.storage.leases`). The sequence is kept a day after
-- the last lead began: started again from 1, the value would still differ from earlier leaders'.
-- KEYS  1 the lease   2 the token sequence
-- ARGV  1 the holder's name   2 the lease's TTL in ms
-- Returns the lease's value when taken, false while someone holds it.
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local value = redis.call('INCR', KEYS[2]) .. ' ' .. ARGV[1]
redis.call('EXPIRE', KEYS[2], 86400)
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
return value
