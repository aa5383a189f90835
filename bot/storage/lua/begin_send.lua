-- Mark a post as being sent, only for the leader: one that stalled past its lease must not post
-- what its successor may be posting. Each queue member has its own mark, so a more urgent post
-- never hides another's uncertainty.
-- KEYS 1 in-flight marks  2 the leader's lease (fenced)
-- ARGV 1 marker (JSON)  2 TTL (ms)  3 the queue member it is for  4 the fence
if not fenced() then return redis.error_reply('DEPOSED the caller no longer leads') end
redis.call('HSET', KEYS[1], ARGV[3], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
