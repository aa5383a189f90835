-- Claims a due scale-revert record: moves its score to the end of the lease (the claim's token).
-- KEYS 1 scale reverts   ARGV 1 record id  2 now  3 the lease's end
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) <= tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  return 1
end
return 0
