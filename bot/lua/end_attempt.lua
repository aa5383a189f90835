-- Clears a post's in-flight mark if it is still the mark of that item: an attempt Slack did not
-- act on needs no lookup. A mark of another item of the same member is left alone.
-- KEYS[1] in-flight hash; ARGV[1] member, ARGV[2] item
local mark = redis.call('HGET', KEYS[1], ARGV[1])
if mark and cjson.decode(mark)['item'] == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
