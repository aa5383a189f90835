-- The root shows the state of version ARGV[2]: done, unless the incident changed meanwhile.
-- KEYS 1 incident  2 edits  3 edit-after
-- ARGV 1 incident id  2 version rendered  3 digest  4 next edit allowed at (ms)  5 edited (1/0)
--      6 TTL of the channel's bookkeeping (ms)
redis.call('HSET', KEYS[1], 'rendered', ARGV[3])
-- An incident gone meanwhile leaves no key for ever.
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[6]) end
if ARGV[5] == '1' then
  keep_edit_after(KEYS[3], ARGV[1], ARGV[4], ARGV[6])
end
if tonumber(redis.call('HGET', KEYS[1], 'v') or '0') == tonumber(ARGV[2]) then
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  local at = ARGV[4]
  if ARGV[5] ~= '1' then at = '0' end
  redis.call('ZADD', KEYS[2], 'XX', at, ARGV[1])
end
return 1
