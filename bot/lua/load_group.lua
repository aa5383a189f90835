-- An alert group and its current incident, in one round trip; for a group never seen before,
-- also the ID its first incident will take (a new group then needs no round trip of its own),
-- unless the caller has an ID reserved earlier and left unused (ARGV 3 is '0').
-- KEYS 1 group  2 incident ID sequence
-- ARGV 1 the incident key prefix  2 the sequence's TTL (s)  3 '1': reserve an ID for a new group
-- Returns {group version, group state, incident version, state, thread, rendered, reserved ID}.
local group = redis.call('HMGET', KEYS[1], 'v', 'state', 'incident')
local incident = {false, false, false, false}
if group[3] and group[3] ~= '' then
  incident = redis.call('HMGET', ARGV[1] .. group[3], 'v', 'state', 'thread', 'rendered')
end
local reserved = false
if not group[2] and ARGV[3] ~= '0' then
  reserved = redis.call('INCR', KEYS[2])
  redis.call('EXPIRE', KEYS[2], ARGV[2])
end
return {group[1], group[2], incident[1], incident[2], incident[3], incident[4], reserved}
