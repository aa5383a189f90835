-- Redis lost queuepilot's state: numbering goes on above the highest number used, the roots found
-- in Slack wait for their groups' next notification (but a group's that opened an incident since),
-- and the marker says when and how many roots were found.
-- KEYS 1 the marker  2 the ID sequence  3 the roots found  4.. the roots' groups, in ARGV's order
--      last: the leader's lease
-- ARGV 1 now (s), '' to raise the numbering only  2 the highest number used  3 the sequence's TTL (s)  4 the roots' TTL (s)
--      5.. group, root JSON pairs;  last: the lease as held
-- The marker and the sequence are kept as long as the incidents (ARGV 3).
if not fenced() then return redis.error_reply('DEPOSED the caller no longer leads') end
local highest = tonumber(ARGV[2])
if tonumber(redis.call('GET', KEYS[2]) or '0') < highest then
  redis.call('SET', KEYS[2], highest, 'EX', ARGV[3])
end
local found = 0
for i = 5, #ARGV - 1, 2 do
  local opened = redis.call('HGET', KEYS[4 + (i - 5) / 2], 'incident')
  if not opened or opened == '' then
    redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
    found = found + 1
  end
end
if found > 0 then redis.call('EXPIRE', KEYS[3], ARGV[4]) end
if ARGV[1] == '' then return found end
-- `unsure` stays until the read is done (`read_done`): a leader taking over reads on.
redis.call('HSET', KEYS[1], 'since', ARGV[1], 'lost_at', ARGV[1], 'found', (#ARGV - 5) / 2,
  'above', highest)
redis.call('EXPIRE', KEYS[1], ARGV[3])
return found
