-- Records an early warning's edit (the version shown); it leaves the edits set once Slack shows
-- its latest version, or it is gone or replaced.
-- KEYS 1 warning  2 warning edits  3 its scale-ups
-- ARGV 1 runner type  2 uid  3 shown version  4 keep (s)
local raw = redis.call('GET', KEYS[1])
local state = raw and cjson.decode(raw)
if not state or state['uid'] ~= ARGV[2] then
  redis.call('SREM', KEYS[2], ARGV[1])
  return 0
end
if tonumber(ARGV[3]) > state['shown'] then state['shown'] = tonumber(ARGV[3]) end
redis.call('SET', KEYS[1], cjson.encode(state), 'EX', ARGV[4])
redis.call('EXPIRE', KEYS[3], ARGV[4])
if state['shown'] >= state['version'] then redis.call('SREM', KEYS[2], ARGV[1]) end
return 1
