-- A storm digest message was posted (the first, or a continuation): remember where, and spend
-- the post like any other.
-- KEYS 1 storm  2 in-flight  3 bucket
-- ARGV 1 storm id  2 ts  3 bucket (or '')  4 digest of what the message shows  5 part
local suffix = ARGV[5] == '0' and '' or (':' .. ARGV[5])
if redis.call('HGET', KEYS[1], 'id') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'ts' .. suffix, ARGV[2], 'shown' .. suffix, ARGV[4])
end
redis.call('HDEL', KEYS[2], 'storm:' .. ARGV[1])
if ARGV[3] ~= '' then redis.call('SET', KEYS[3], ARGV[3], 'PX', 60000) end
return 1
