-- Extends a lease, only for its holder.
-- KEYS 1 lease   ARGV 1 token  2 TTL (ms)
if holds(KEYS[1], ARGV[1]) then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
