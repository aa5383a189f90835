-- An alert group, its current incident, the number a new incident would take (the commit that
-- opens one checks it is still next) and its root found in Slack after a loss, in one round trip.
-- KEYS 1 group  2 incident ID sequence  3 roots found after a loss
-- ARGV 1 the incident key prefix  2 the group's hash
-- Returns {group version, group state, incident version, state, thread, rendered, next ID,
-- found root}.
local group = redis.call('HMGET', KEYS[1], 'v', 'state', 'incident')
local incident = {false, false, false, false}
if group[3] and group[3] ~= '' then
  incident = redis.call('HMGET', ARGV[1] .. group[3], 'v', 'state', 'thread', 'rendered')
end
local next_id = tonumber(redis.call('GET', KEYS[2]) or '0') + 1
local found = redis.call('HGET', KEYS[3], ARGV[2])
return {group[1], group[2], incident[1], incident[2], incident[3], incident[4], next_id, found}
