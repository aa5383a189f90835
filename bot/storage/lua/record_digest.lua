-- A storm digest message was posted (the first, or a continuation): remember where.
-- KEYS 1 storm  2 in-flight
-- ARGV 1 storm id  2 ts  3 digest of what the message shows  4 part
local suffix = ARGV[4] == '0' and '' or (':' .. ARGV[4])
if redis.call('HGET', KEYS[1], 'id') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'ts' .. suffix, ARGV[2], 'shown' .. suffix, ARGV[3])
end
redis.call('HDEL', KEYS[2], 'storm:' .. ARGV[1])
return 1
