-- Releases a lease, only for its holder: one that expired and was taken by someone else stays.
-- KEYS 1 lease   ARGV 1 token
if holds(KEYS[1], ARGV[1]) then return redis.call('DEL', KEYS[1]) end
return 0
