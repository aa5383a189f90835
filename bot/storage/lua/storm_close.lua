-- End a storm whose summary is shown, unless a new group joined it since it was judged over.
-- KEYS 1 storm  2 storm members  3 storm placed
-- ARGV 1 storm id  2 last_added_ms judged
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'last_added_ms') ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return 1
