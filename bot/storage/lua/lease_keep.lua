-- Keeps a lease a while longer under a new value (a cooldown's note), only for its holder.
-- KEYS 1 lease   ARGV 1 token  2 TTL (ms)  3 the value kept
if holds(KEYS[1], ARGV[1]) then
  return redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2]) and 1
end
return 0
