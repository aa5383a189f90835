-- Keeps an early warning as decided, and queues its post (not posted yet) or its edit. What the
-- sender recorded (`ts`, `shown`) is never overwritten; a write no newer than the stored version
-- is refused: the first decision on a version wins. A new warning does not replace one whose end
-- Slack has not shown yet (it waits a reading); one that ends before it was posted leaves the
-- queue unless its post is under way (then its record turns it into an edit).
-- KEYS 1 warning  2 warnings index  3 send sequence  4 posts  5 posts bell  6 warning edits
--      7 warning bell  8 in-flight marks  9 its scale-ups
-- ARGV 1 state (JSON)  2 runner type  3 queue member  4 keep (s)  5 band  6 refused ts
--      7 scale-ups (JSON, '': none)
local new = cjson.decode(ARGV[1])
local raw = redis.call('GET', KEYS[1])
if raw then
  local old = cjson.decode(raw)
  if old['uid'] == new['uid'] then
    if old['version'] >= new['version'] then return 0 end
    new['ts'] = old['ts']
    new['shown'] = old['shown']
  elseif old['ts'] ~= '' and old['ts'] ~= ARGV[6] and old['shown'] < old['version'] then
    return 0
  end
end
redis.call('SET', KEYS[1], cjson.encode(new), 'EX', ARGV[4])
if ARGV[7] == '' then
  redis.call('DEL', KEYS[9])
else
  redis.call('SET', KEYS[9], ARGV[7], 'EX', ARGV[4])
end
redis.call('SADD', KEYS[2], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[4])
if new['ts'] == '' then
  if new['phase'] == 'active' then
    if not redis.call('ZSCORE', KEYS[4], ARGV[3]) then
      local seq = redis.call('INCR', KEYS[3])
      -- Past the roots (the storm rule counts those), beside an incident's event replies.
      redis.call('ZADD', KEYS[4], tonumber(ARGV[5]) * BAND + seq, ARGV[3])
    end
    ring(KEYS[5], 10000)
  elseif redis.call('HEXISTS', KEYS[8], ARGV[3]) == 0 then
    redis.call('ZREM', KEYS[4], ARGV[3])
  end
elseif new['ts'] ~= ARGV[6] and new['version'] > new['shown'] then
  redis.call('SADD', KEYS[6], ARGV[2])
  ring(KEYS[7], 10000)
end
return 1
