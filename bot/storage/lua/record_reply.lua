-- A reply was posted (or can never be): take it off the thread's outbox if it is still first,
-- and move the thread to its next reply's place in the channel's queue.
-- KEYS 1 outbox  2 outbox items  3 posts  4 in-flight  5 incident
-- ARGV 1 incident id  2 item name
--      3 the ts of a reply just posted that a later one may edit (or '')  4 the field it goes in
if redis.call('LINDEX', KEYS[1], 0) == ARGV[2] then
  redis.call('LPOP', KEYS[1])
  redis.call('HDEL', KEYS[2], ARGV[2])
end
local best = thread_score(KEYS[1])
if best == nil then
  redis.call('ZREM', KEYS[3], 'replies:' .. ARGV[1])
else
  redis.call('ZADD', KEYS[3], best, 'replies:' .. ARGV[1])
end
redis.call('HDEL', KEYS[4], 'replies:' .. ARGV[1])
if ARGV[3] ~= '' and redis.call('EXISTS', KEYS[5]) == 1 then
  redis.call('HSET', KEYS[5], ARGV[4], ARGV[3])
end
return 1
