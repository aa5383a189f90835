-- Claims due members: each one's score moves to the claim's lease end (its token), so it is not
-- due to anyone else, and comes due again if the claimer dies. Returns the members claimed.
-- KEYS 1 due set   ARGV 1 now  2 the lease's end  3 how many at most  4… the members to claim
-- (none given: the first due ones)
local members = {}
if #ARGV > 3 then
  for i = 4, #ARGV do members[#members + 1] = ARGV[i] end
else
  members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
end
local claimed = {}
for _, member in ipairs(members) do
  local score = redis.call('ZSCORE', KEYS[1], member)
  if score and tonumber(score) <= tonumber(ARGV[1]) then
    redis.call('ZADD', KEYS[1], ARGV[2], member)
    claimed[#claimed + 1] = member
  end
end
return claimed
