-- An alert group and its current incident, in one round trip.
-- KEYS 1 group   ARGV 1 the incident key prefix
-- Returns {group version, group state, incident version, state, thread, rendered}.
local group = redis.call('HMGET', KEYS[1], 'v', 'state', 'incident')
local incident = {false, false, false, false}
if group[3] and group[3] ~= '' then
  incident = redis.call('HMGET', ARGV[1] .. group[3], 'v', 'state', 'thread', 'rendered')
end
return {group[1], group[2], incident[1], incident[2], incident[3], incident[4]}
