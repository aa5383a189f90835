-- Ends a claim while it is ours (the score is still its token): whoever scheduled the member
-- meanwhile keeps their due time.
-- KEYS 1 due set  2 the member's data (the due set's own key again when it keeps none)
-- ARGV 1 member  2 the claim's token (its lease's end)  3 'done', or the next due time
--      4 the set's TTL (s; '' for none)  5 the member's data to keep ('' for none)  6 its TTL (s)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == 'done' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  if KEYS[2] ~= KEYS[1] then redis.call('DEL', KEYS[2]) end
  return 1
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
if ARGV[4] ~= '' then redis.call('EXPIRE', KEYS[1], ARGV[4]) end
if ARGV[5] ~= '' then redis.call('SET', KEYS[2], ARGV[5], 'EX', ARGV[6]) end
return 1
