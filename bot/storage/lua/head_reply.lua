-- The next reply of a thread, with where the thread is and its latest status reply.
-- A status goes out as the last of the replies waiting, so it shows nothing newer than a reply
-- posted below it: one queued before another reply (a scale-up, an acknowledgement) moves
-- behind it with its picture, and a quiet one, an edit of a reply higher up, is dropped. Never
-- the one in flight: it may be in the thread already.
-- KEYS 1 outbox  2 outbox items  3 incident
-- ARGV 1 the item in flight, or ''
-- Returns {item name, payload, thread, uid, the ts of the reply it edits} (false fields when
-- missing): a quiet status edits the latest status reply, a reply naming one in `edits` that.
local STATUS_LIKE = {status = true, restatus = true, chart = true}
local items = redis.call('LRANGE', KEYS[1], 0, -1)
local last = 0 -- the last reply that is no status
for i, item in ipairs(items) do
  local _, _, kind = string.find(item, '^([^:]+):')
  if not STATUS_LIKE[kind] then last = i end
end
local order, behind, changed = {}, {}, false
for i, item in ipairs(items) do
  local _, _, kind = string.find(item, '^([^:]+):')
  if i >= last or not STATUS_LIKE[kind] or item == ARGV[1] then
    table.insert(order, item)
    if i == last then
      for _, moved in ipairs(behind) do table.insert(order, moved) end
    end
  elseif kind == 'restatus' then
    redis.call('HDEL', KEYS[2], item)
    changed = true
  else
    table.insert(behind, item)
    changed = true
  end
end
if changed then
  local ttl = redis.call('PTTL', KEYS[1])
  redis.call('DEL', KEYS[1])
  redis.call('RPUSH', KEYS[1], unpack(order))
  if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
end
local item = order[1]
if not item then return {false, false, false, false, false} end
local payload = redis.call('HGET', KEYS[2], item)
local _, _, kind = string.find(item, '^([^:]+):')
local edits = kind == 'restatus' and 'status_ts' or nil
if payload and string.find(payload, '"edits"', 1, true) then
  edits = cjson.decode(payload).edits or edits
end
local incident = redis.call('HMGET', KEYS[3], 'thread', 'uid', edits or 'status_ts')
if not edits then incident[3] = false end
return {item, payload, incident[1], incident[2], incident[3]}
