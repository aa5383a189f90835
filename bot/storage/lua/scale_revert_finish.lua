-- Ends a claim, only while it is still ours (the score is our lease's end): ARGV[3] 'drop'
-- forgets the record; else ARGV[3] is the next look's time and ARGV[4] the record to keep.
-- KEYS 1 scale reverts  2 the record   ARGV 1 record id  2 the lease's end  3 'drop' or next look
--      4 record  5 record TTL (s)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then
  return 0
end
if ARGV[3] == 'drop' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('DEL', KEYS[2])
else
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  redis.call('SET', KEYS[2], ARGV[4], 'EX', ARGV[5])
end
return 1
