-- Mark a new incident's root in flight from a hint (bot/root_hints.py), only if it is exactly
-- what the sender's own reads would post next: the sender holds the lease; the root heads the
-- channel's queue with no mark of an earlier attempt; the incident is at the hinted version,
-- with no thread yet; and no storm is open or would open now (bot/lua/storm_sweep.lua would
-- change nothing). Otherwise nothing is written and the sender reads the queue as usual.
-- KEYS 1 sender lease  2 in-flight marks  3 channel posts  4 incident  5 storm
-- ARGV 1 lease token  2 marker (JSON)  3 TTL (ms)  4 queue member  5 incident version
--      6 storm threshold (0: no storm digest)
local BAND = 1099511627776 -- roots score below one band (see commit.lua)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('ZRANK', KEYS[3], ARGV[4]) ~= 0 then return 0 end
if redis.call('HEXISTS', KEYS[2], ARGV[4]) == 1 then return 0 end
if redis.call('HGET', KEYS[4], 'v') ~= ARGV[5] then return 0 end
if redis.call('HEXISTS', KEYS[4], 'thread') == 1 then return 0 end
local threshold = tonumber(ARGV[6])
if threshold > 0 then
  if redis.call('HEXISTS', KEYS[5], 'id') == 1 then return 0 end
  if redis.call('ZCOUNT', KEYS[3], 0, BAND - 1) >= threshold then return 0 end
end
redis.call('HSET', KEYS[2], ARGV[4], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
