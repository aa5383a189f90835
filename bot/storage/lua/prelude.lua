-- What every script shares (`lua()` in bot/storage/keys.py puts this first, after the
-- score constants it takes from Python: BAND and RANK).
--
-- A channel's posts are one sorted set. A new root scores below one band: its severity rank,
-- then its arrival. A thread with replies waiting scores band * BAND + the sequence number of
-- its most urgent reply. So roots always go first, and the roots waiting are the scores up to
-- ROOTS_END: that is the storm rule's count, here and in Python.
local ROOTS_END = BAND - 1

local function root_score(rank, seq)
  return rank * RANK + seq
end

-- A reply's score, from its item name "kind:band:seq".
local function reply_score(item)
  local _, _, band, seq = string.find(item, '^[^:]+:(%d+):(%d+)$')
  return tonumber(band) * BAND + tonumber(seq)
end

-- A thread's place in the channel's queue: that of its most urgent waiting reply (nil if none).
local function thread_score(outbox)
  local best = nil
  for _, item in ipairs(redis.call('LRANGE', outbox, 0, -1)) do
    local score = reply_score(item)
    if best == nil or score < best then best = score end
  end
  return best
end

-- Wake the channel's sender (it also polls, so a bell needs only a short life).
local function ring(bell, ttl_ms)
  redis.call('LPUSH', bell, '1')
  redis.call('LTRIM', bell, 0, 0)
  redis.call('PEXPIRE', bell, ttl_ms)
end

-- Whether the lease at `key` is still held by `token` (the value its holder stored): only then
-- may it be renewed, kept or released.
local function holds(key, token)
  return redis.call('GET', key) == token
end

-- A fenced script's last key is the leader's lease and its last argument the lease's value as
-- the caller holds it (bot/storage/leases.py): only the current leader's writes pass. An empty
-- value is a store that fences nothing (built by a test or a tool, never by `serve`).
local function fenced()
  local held = ARGV[#ARGV]
  return held == '' or redis.call('GET', KEYS[#KEYS]) == held
end

-- A channel's edit-after times (incident -> when its root may be edited again, ms). A time gone
-- by says no more than none (the commit takes the later of now and it), so once the hash holds
-- more than EDIT_AFTER_KEPT they are dropped: it stays the size of the roots edited lately, in a
-- channel busy enough that its TTL never runs out.
local EDIT_AFTER_KEPT = 64
local function keep_edit_after(key, incident, at_ms, ttl_ms)
  redis.call('HSET', key, incident, at_ms)
  redis.call('PEXPIRE', key, ttl_ms)
  if redis.call('HLEN', key) <= EDIT_AFTER_KEPT then return end
  local clock = redis.call('TIME')
  local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    if tonumber(all[i + 1]) <= now_ms then redis.call('HDEL', key, all[i]) end
  end
end
