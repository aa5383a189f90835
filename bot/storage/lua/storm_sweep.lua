-- Fold the channel's waiting roots into its storm digest; open the storm when enough wait.
-- KEYS 1 channel posts  2 storm  3 storm members  4 send sequence  5 storms paused (after a
--      digest that could never be sent: the roots go on alone)
-- ARGV 1 threshold (roots waiting that open a storm; 0: only sweep one already open)
--      2 now (ms)  3 TTL of the storm's keys (ms)
-- Returns {storm id or 0, 1 if opened now, members added}.
local threshold, now, ttl = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local id = redis.call('HGET', KEYS[2], 'id')
local roots = redis.call('ZRANGEBYSCORE', KEYS[1], 0, ROOTS_END, 'WITHSCORES')
local opened = 0
if not id then
  if threshold <= 0 or #roots / 2 < threshold then return {0, 0, 0} end
  if redis.call('EXISTS', KEYS[5]) == 1 then return {0, 0, 0} end
  id = tostring(redis.call('INCR', KEYS[4]))
  redis.call('HSET', KEYS[2], 'id', id, 'started_ms', now, 'ts', '', 'last_added_ms', now)
  opened = 1
end
local added = 0
for i = 1, #roots, 2 do
  local incident = string.sub(roots[i], 6) -- 'root:<id>'
  added = added + redis.call('ZADD', KEYS[3], 'NX', roots[i + 1], incident)
end
if added > 0 then
  redis.call('HSET', KEYS[2], 'last_added_ms', now)
  -- Since when a group has waited for a digest line (`storm_place` clears it).
  redis.call('HSETNX', KEYS[2], 'waiting_ms', now)
end
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('PEXPIRE', KEYS[3], ttl)
return {tonumber(id), opened, added}
