-- Records an early warning's post (its ts, the version shown), its member out of the channel's
-- posts and marks; a change made meanwhile is queued as an edit.
-- KEYS 1 warning  2 posts  3 in-flight marks  4 warning edits  5 warning bell  6 its scale-ups
-- ARGV 1 member  2 uid  3 ts  4 shown version  5 runner type  6 keep (s)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
local raw = redis.call('GET', KEYS[1])
local state = raw and cjson.decode(raw)
if not state or state['uid'] ~= ARGV[2] then return 0 end
state['ts'] = ARGV[3]
state['shown'] = tonumber(ARGV[4])
redis.call('SET', KEYS[1], cjson.encode(state), 'EX', ARGV[6])
redis.call('EXPIRE', KEYS[6], ARGV[6])
if state['version'] > state['shown'] then
  redis.call('SADD', KEYS[4], ARGV[5])
  ring(KEYS[5], 10000)
end
return 1
