-- The channel's most urgent queue member and its in-flight mark, in one round trip: the sender
-- reads both before every post.
-- KEYS 1 posts  2 in-flight marks
local member = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
if not member then return {} end
return {member, redis.call('HGET', KEYS[2], member)}
