-- The storm digest was posted: remember where, and spend the post like any other.
-- KEYS 1 storm  2 in-flight  3 bucket
-- ARGV 1 storm id  2 ts  3 bucket (or '')  4 digest of what the message shows
if redis.call('HGET', KEYS[1], 'id') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'ts', ARGV[2], 'shown', ARGV[4])
end
redis.call('HDEL', KEYS[2], 'storm:' .. ARGV[1])
if ARGV[3] ~= '' then redis.call('SET', KEYS[3], ARGV[3], 'PX', 60000) end
return 1
