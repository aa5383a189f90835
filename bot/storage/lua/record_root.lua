-- The root message was posted: remember where, and check the root again after its first post.
-- KEYS 1 incident  2 message index  3 posts  4 in-flight  5 edits  6 edit-after  7 edits bell
-- ARGV 1 incident id  2 thread JSON  3 digest of what was posted  4 edit-after (ms)
--      5 TTL of the channel's bookkeeping (ms)  6 version posted  7 '1' if an edit would differ
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then ttl = tonumber(ARGV[5]) end
redis.call('HSET', KEYS[1], 'thread', ARGV[2], 'rendered', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)  -- an incident gone meanwhile leaves no key for ever
redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)
redis.call('ZREM', KEYS[3], 'root:' .. ARGV[1])
redis.call('HDEL', KEYS[4], 'root:' .. ARGV[1])
keep_edit_after(KEYS[6], ARGV[1], ARGV[4], ARGV[5])
-- The state may have moved on while the post was under way, or the owner is named in the post and
-- mentioned in edits: then the root needs an edit.
if ARGV[7] == '1' or tonumber(redis.call('HGET', KEYS[1], 'v') or '0') ~= tonumber(ARGV[6]) then
  redis.call('ZADD', KEYS[5], 'NX', ARGV[4], ARGV[1])
  redis.call('PEXPIRE', KEYS[5], ARGV[5])
  ring(KEYS[7], 10000)
end
return 1
