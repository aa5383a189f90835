-- Claims due members of a due set: each one's score moves to the end of the claim's lease (its
-- token), so other replicas see it as not due, and it comes due again if the claimer dies.
-- KEYS 1 due set   ARGV 1 now  2 the lease's end  3 how many at most  4… the members to claim
-- (none given: the first due ones). Returns the members claimed.
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
