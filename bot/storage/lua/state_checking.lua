-- What the leader's read of Slack's history after a possible loss says of itself: set, or
-- deleted once the read ends. Only the leader's: a replica that lost the lead never deletes what
-- the next leader's read says.
-- KEYS 1 the text's key  last: the leader's lease
-- ARGV 1 the text, '' to delete it  2 its TTL (s)  last: the lease as held
if not fenced() then return redis.error_reply('DEPOSED the caller no longer leads') end
if ARGV[1] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
end
return 1
