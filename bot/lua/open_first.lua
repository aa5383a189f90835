-- A lone notification of an alert group Redis has never seen, applied as it is accepted: one
-- round trip where the stream's path takes two (the append, then the consumer's commit).
--
-- If the group exists, the notification is appended to the stream exactly as append.lua would,
-- and its consumer applies it. Otherwise the new incident takes the next ID, the commit the
-- webhook built (for ARGV[2] as its ID) is applied by commit.lua's own code (`commit` below,
-- pasted in by bot/store.py), and nothing waits in the stream. The group's order starts at the
-- stream's last entry: anything of this group accepted before it is older, and stale.
--
-- KEYS  1-20 commit.lua's, with ARGV[2] where the new incident's ID goes   21 the ID sequence
-- ARGV  1 commit.lua's change, with ARGV[2] for the incident's ID and ARGV[3] for the group's
--       order   2, 3 those placeholders (letters and digits only)   4 the sequence's TTL (s)
--       5.. the stream entry's field-value pairs, as append.lua writes them
-- Returns {entry ID} when the entry was appended for a consumer, or {'', incident ID, version,
-- 1 if the root was marked in flight} when the incident was opened here.
local function append()
  return {redis.call('XADD', KEYS[14], '*', unpack(ARGV, 5))}
end
if redis.call('EXISTS', KEYS[2]) == 1 then return append() end

local order = '0-0'
if redis.call('EXISTS', KEYS[14]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[14])
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then order = info[i + 1] end
  end
end
local id = tostring(redis.call('INCR', KEYS[21]))
redis.call('EXPIRE', KEYS[21], ARGV[4])

local function fill(text)
  return (string.gsub(string.gsub(text, ARGV[2], id), ARGV[3], order))
end
local filled_keys = {}
for i = 1, 20 do filled_keys[i] = fill(KEYS[i]) end

local function commit(KEYS, ARGV)
--[[commit.lua]]
end

local result = commit(filled_keys, {fill(ARGV[1])})
local version, marked = result, 0
if type(result) == 'table' then version, marked = result[1], result[2] end
-- An incident left at this ID by an earlier life of the sequence (it expired, and restarted)
-- fails the commit's fence: the ID is skipped and the consumer opens the incident.
if version < 0 then return append() end
return {'', id, version, marked}
