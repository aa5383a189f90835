-- Append notifications arriving together to the stream in one call (a group commit): one
-- command and one reply for the batch, where a pipeline of XADDs costs the client a command
-- and a reply each. Returns the entries' IDs, in order.
-- KEYS 1 stream
-- ARGV a field count, then that many field-value pairs, per entry
local ids, i = {}, 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  ids[#ids + 1] = redis.call('XADD', KEYS[1], '*', unpack(ARGV, i + 1, i + 2 * n))
  i = i + 1 + 2 * n
end
return ids
