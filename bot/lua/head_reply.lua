-- The next reply of a thread, with where the thread is.
-- KEYS 1 outbox  2 outbox items  3 incident
-- Returns {item name, payload, thread, uid} (false fields when missing).
local item = redis.call('LINDEX', KEYS[1], 0)
if not item then return {false, false, false, false} end
local payload = redis.call('HGET', KEYS[2], item)
local incident = redis.call('HMGET', KEYS[3], 'thread', 'uid')
return {item, payload, incident[1], incident[2]}
