-- What the leader's read of Slack's history says of itself, or deleted once it ends; fenced, so a
-- deposed leader never deletes its successor's.
-- KEYS 1 the text's key  last: the leader's lease
-- ARGV 1 the text, '' to delete it  2 its TTL (s)  last: the lease as held
if not fenced() then return redis.error_reply('DEPOSED the caller no longer leads') end
if ARGV[1] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
end
return 1
