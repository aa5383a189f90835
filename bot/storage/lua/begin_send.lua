-- Mark a post as being sent, only for the leader and while this sender still holds the
-- channel's lease: a sender that stalled past either must not post what its successor may be
-- posting. Each queue member has its own mark, so a more urgent post never hides another's
-- uncertainty.
-- KEYS 1 sender lease  2 in-flight marks  3 the leader's lease (fenced)
-- ARGV 1 lease token  2 marker (JSON)  3 TTL (ms)  4 the queue member it is for  5 the fence
if not fenced() then return redis.error_reply('DEPOSED the caller no longer leads') end
if not holds(KEYS[1], ARGV[1]) then return 0 end
redis.call('HSET', KEYS[2], ARGV[4], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
