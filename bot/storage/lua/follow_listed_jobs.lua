-- Follows the HUD's queued jobs across its listings (`bot.storage.listed_jobs`). A job listed at
-- the last listing and not at this one has left the queue: it is kept with when it was last
-- listed and when found gone. One listed again (the HUD's data lagging a moment) never left.
-- A listing older than the last one followed is stale. An incomplete one (rows left unread) may
-- lack a job still queued: only a job it has not listed for longer than the gap a wait can be
-- told across is taken as gone, so the listed hash stays bounded while rows go unread.
-- KEYS: listed hash (id -> "<last listed>\t<job>"), the last listing's time, left hash
-- (id -> "<gone by>\t<last listed>\t<job>"), left index (by gone by).
-- ARGV: now, complete ('1' or '0'), oldest kept (epoch s), cap, seconds the keys live, the gap
-- (s), then pairs: job ID, its JSON.
-- Returns 'stale' or the number of jobs found gone.
local now, complete, oldest, cap, keep = ARGV[1], ARGV[2] == '1', ARGV[3], tonumber(ARGV[4]), ARGV[5]
local unlisted_since = tonumber(now) - tonumber(ARGV[6])
local last = redis.call('GET', KEYS[2])
if last and tonumber(last) > tonumber(now) then return 'stale' end
local listed = {}
for i = 7, #ARGV, 2 do listed[ARGV[i]] = ARGV[i + 1] end
local gone = 0
local before = redis.call('HGETALL', KEYS[1])
for i = 1, #before, 2 do
  local id, kept = before[i], before[i + 1]
  if listed[id] == nil then
    local seen = tonumber(string.match(kept, '^([^\t]*)'))
    if complete or not seen or seen < unlisted_since then
      redis.call('HSET', KEYS[3], id, now .. '\t' .. kept)
      redis.call('ZADD', KEYS[4], now, id)
      redis.call('HDEL', KEYS[1], id)
      gone = gone + 1
    end
  end
end
for id, job in pairs(listed) do
  redis.call('HSET', KEYS[1], id, now .. '\t' .. job)
  if redis.call('ZREM', KEYS[4], id) == 1 then redis.call('HDEL', KEYS[3], id) end
end
redis.call('SET', KEYS[2], now, 'EX', keep)
-- The left keep the span and the cap: what falls out goes a hundred at a time.
local old = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. oldest, 'LIMIT', 0, 100)
local over = redis.call('ZCARD', KEYS[4]) - #old - cap
if over > 0 then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[4], #old, #old + math.min(over, 100) - 1)) do
    old[#old + 1] = id
  end
end
if #old > 0 then
  redis.call('HDEL', KEYS[3], unpack(old))
  redis.call('ZREM', KEYS[4], unpack(old))
end
for k = 1, 4 do redis.call('EXPIRE', KEYS[k], keep) end
return gone
