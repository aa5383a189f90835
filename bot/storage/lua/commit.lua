-- One change of an incident: all or nothing, and only if nobody changed it since it was read.
--
-- KEYS  1 incident          2 group              3 timeline           4 all-incidents index
--       5 open index        6 status due         7 outbox (item names) 8 outbox items
--       9 channel posts     10 channel edits     11 edit-after         12 sending channels
--      13 send sequence     14 notification stream 15 posts bell       16 edits bell
--      17 the root's message index (the incident key again when unknown)  18 the ID sequence
--      19 the incidents whose GitHub issue has something to hear
--      20 the roots found in Slack after Redis lost the state  21 the leader's lease
-- ARGV  1 the change, as JSON (bot/storage/incident_store.py: Commit)  2 the lease as held
-- Returns the incident's new version, 0 when no incident was written, -1 on a version mismatch;
-- an error when the caller no longer leads.
if not fenced() then return redis.error_reply('DEPOSED the caller no longer leads') end
local c = cjson.decode(ARGV[1])

local function version_of(key)
  return tonumber(redis.call('HGET', key, 'v') or '0')
end
if c.group_v ~= nil and version_of(KEYS[2]) ~= c.group_v then return -1 end
if c.opens then
  -- A new incident takes the ID sequence's next number, fenced like a version: a writer that
  -- read the sequence before another incident opened is refused and redoes its work.
  if tonumber(redis.call('GET', KEYS[18]) or '0') + 1 ~= tonumber(c.id) then return -1 end
  redis.call('SET', KEYS[18], c.id, 'EX', c.seq_ttl_s)
  -- The group has a thread of its own now: a root of it found in Slack before is not taken up.
  if c.group_hash then redis.call('HDEL', KEYS[20], c.group_hash) end
  -- An old incident kept this number (the sequence expired and began again): skip it.
  if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
elseif c.adopts then
  -- Its number is its root's in Slack, used before Redis lost the state: taken up once. Refused,
  -- the group's next try opens an incident of its own.
  redis.call('HDEL', KEYS[20], c.group_hash)
  if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
elseif c.incident_v ~= nil and version_of(KEYS[1]) ~= c.incident_v then
  return -1
end

local function keep(key, ttl)
  redis.call('PEXPIRE', key, ttl)
end
local bell_ttl = math.min(10000, c.index_ttl_ms)

local version = 0
if c.state ~= nil then
  redis.call('HSET', KEYS[1], 'state', c.state, 'uid', c.uid, 'channel', c.channel)
  if c.adopts then
    -- The root is in Slack already: indexed as a posted one, and edited below (no digest).
    redis.call('HSET', KEYS[1], 'thread', c.thread)
    redis.call('SET', KEYS[17], c.id)
  end
  version = redis.call('HINCRBY', KEYS[1], 'v', 1)
  keep(KEYS[1], c.ttl_ms)
  if KEYS[17] ~= KEYS[1] then keep(KEYS[17], c.ttl_ms) end
  if c.index then
    redis.call('ZADD', KEYS[4], c.updated, c.id)
    redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', c.horizon)
    keep(KEYS[4], c.index_ttl_ms)
  end
  if c.open then
    redis.call('ZADD', KEYS[5], c.opened, c.id)
    keep(KEYS[5], c.index_ttl_ms)
  else
    redis.call('ZREM', KEYS[5], c.id)
  end
end
if c.group ~= nil then
  redis.call('HSET', KEYS[2], 'state', c.group, 'incident', c.group_incident)
  redis.call('HINCRBY', KEYS[2], 'v', 1)
  keep(KEYS[2], c.group_ttl_ms)
end
if c.due ~= nil then
  redis.call('ZADD', KEYS[6], c.due, c.id)
  keep(KEYS[6], c.index_ttl_ms)
end
if c.stop_status then redis.call('ZREM', KEYS[6], c.id) end

if c.events ~= nil and #c.events > 0 then
  for _, event in ipairs(c.events) do redis.call('RPUSH', KEYS[3], event) end
  redis.call('LTRIM', KEYS[3], -500, -1)
  keep(KEYS[3], c.ttl_ms)
  if c.issue_due then
    redis.call('ZADD', KEYS[19], c.now_ms / 1000, c.id)
    keep(KEYS[19], c.index_ttl_ms)
  end
end

-- A quiet status gives way to a new status still waiting, which shows the latest reading when
-- it goes: in its place, it would edit the status reply before that one.
local function status_waits(outbox)
  for _, item in ipairs(redis.call('LRANGE', outbox, 0, -1)) do
    if string.find(item, '^status:') then return true end
  end
  return false
end

local function push_reply(reply)
  local seq = redis.call('INCR', KEYS[13])
  local item = reply.kind .. ':' .. reply.band .. ':' .. seq
  local replaced = false
  if type(reply.replaces) == 'table' then -- e.g. a newer status replaces one still waiting
    local kinds = {}
    for _, kind in ipairs(reply.replaces) do kinds[kind] = true end
    for _, old in ipairs(redis.call('LRANGE', KEYS[7], 0, -1)) do
      local _, _, kind = string.find(old, '^([^:]+):')
      if kinds[kind] then
        redis.call('LREM', KEYS[7], 0, old)
        redis.call('HDEL', KEYS[8], old)
        replaced = true
      end
    end
  end
  redis.call('RPUSH', KEYS[7], item)
  -- What it says instead when it took a waiting reply's place (the summary, the chart of a
  -- status that never went out).
  redis.call('HSET', KEYS[8], item, (replaced and reply.payload_if_replaced) or reply.payload)
end

local posts_changed = false
if c.replies ~= nil and #c.replies > 0 then
  for _, reply in ipairs(c.replies) do
    if not (reply.kind == 'restatus' and status_waits(KEYS[7])) then
      push_reply(reply)
    end
  end
  while redis.call('LLEN', KEYS[7]) > c.max_outbox do
    redis.call('HDEL', KEYS[8], redis.call('LPOP', KEYS[7]))
  end
  -- The thread takes the place of its most urgent reply; its replies still go out in order.
  redis.call('ZADD', KEYS[9], thread_score(KEYS[7]), 'replies:' .. c.id)
  keep(KEYS[7], c.ttl_ms)
  keep(KEYS[8], c.ttl_ms)
  posts_changed = true
end

if c.root then
  if redis.call('HEXISTS', KEYS[1], 'thread') == 1 then
    local after = tonumber(redis.call('HGET', KEYS[11], c.id) or '0')
    redis.call('ZADD', KEYS[10], 'NX', math.max(c.now_ms, after), c.id)
    keep(KEYS[10], c.index_ttl_ms)
    ring(KEYS[16], bell_ttl)
  elseif not redis.call('ZSCORE', KEYS[9], 'root:' .. c.id) then
    local score = root_score(c.rank or 0, redis.call('INCR', KEYS[13]))
    redis.call('ZADD', KEYS[9], score, 'root:' .. c.id)
    posts_changed = true
  end
end

if posts_changed then
  keep(KEYS[9], c.index_ttl_ms)
  keep(KEYS[13], c.index_ttl_ms)
  redis.call('SADD', KEYS[12], c.channel)
  keep(KEYS[12], c.index_ttl_ms)
  ring(KEYS[15], bell_ttl)
end

if type(c.acks) == 'table' and #c.acks > 0 then
  redis.call('XACK', KEYS[14], 'intake', unpack(c.acks))
  redis.call('XDEL', KEYS[14], unpack(c.acks))
end
return version
