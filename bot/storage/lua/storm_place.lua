-- Give the storm's groups that no digest message lists yet a place in digest message `part`
-- (0 the first digest, then its continuations), at most `room` lines a message. One script, so
-- a group is listed by one message only, whichever loop or replica draws it. A continuation
-- (`part` one past the last) is created only when it has a group to list.
-- KEYS 1 storm  2 storm members  3 storm placed (incident ID -> part)
-- ARGV 1 storm id  2 part  3 room  4 TTL of the storm's keys (ms)
-- Returns the part's incident IDs, most severe first ({} when there is nothing to list).
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then return {} end
local part, room = tonumber(ARGV[2]), tonumber(ARGV[3])
local parts = tonumber(redis.call('HGET', KEYS[1], 'parts') or '1')
if part > parts then return {} end
local where, count = {}, 0
local placed = redis.call('HGETALL', KEYS[3])
for i = 1, #placed, 2 do
  local at = tonumber(placed[i + 1])
  where[placed[i]] = at
  if at == part then count = count + 1 end
end
local listed, left = {}, 0
for _, incident in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local at = where[incident]
  if at == nil and count < room then
    redis.call('HSET', KEYS[3], incident, part)
    at, count = part, count + 1
  elseif at == nil then
    left = left + 1
  end
  if at == part then listed[#listed + 1] = incident end
end
if #listed == 0 then return {} end
if part == parts then redis.call('HSET', KEYS[1], 'parts', part + 1) end
if left == 0 then redis.call('HDEL', KEYS[1], 'waiting_ms') end
redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[4]))
return listed
