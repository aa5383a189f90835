-- Mark a post as being sent, only while this sender still holds the channel's lease: a sender
-- that stalled past its lease must not post what its successor may be posting.
-- KEYS 1 sender lease  2 in-flight marker   ARGV 1 lease token  2 marker (JSON)  3 TTL (ms)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
