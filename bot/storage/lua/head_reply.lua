-- The next reply of a thread, with where the thread is and its latest status reply.
-- KEYS 1 outbox  2 outbox items  3 incident
-- Returns {item name, payload, thread, uid, status ts} (false fields when missing).
local item = redis.call('LINDEX', KEYS[1], 0)
if not item then return {false, false, false, false, false} end
local payload = redis.call('HGET', KEYS[2], item)
local incident = redis.call('HMGET', KEYS[3], 'thread', 'uid', 'status_ts')
return {item, payload, incident[1], incident[2], incident[3]}
