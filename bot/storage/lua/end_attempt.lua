-- Clears a post's in-flight mark if it is still exactly the mark this attempt set: an attempt
-- Slack did not act on needs no lookup, and a successor's mark of the same post is left alone.
-- KEYS[1] in-flight hash; ARGV[1] member, ARGV[2] the mark as set
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
