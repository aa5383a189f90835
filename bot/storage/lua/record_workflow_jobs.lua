-- Records GitHub jobs (`bot.storage.workflow_jobs`): one webhook delivery's, or those a listing
-- found. A job's state only moves forward (queued/waiting, in_progress, completed); a job still
-- to finish is in the live hash, a finished one in the done hash, each indexed by the time of its
-- state. A delivery is recorded once by its signature, with a job or without (a ping, an event
-- not read); one whose state is older than the span kept is stale (its job may have been dropped
-- already: recorded, it could come back as queued).
-- KEYS: live hash, live index, done hash, done index, the delivery's key, the kinds' last
-- arrivals, the kinds' counts in this slot.
-- ARGV: now, oldest kept (epoch s), cap per hash, seconds the keys live, the delivery's signature
-- ('': a listing's jobs), its kind ('event.action'), seconds its signature is kept, seconds a
-- slot is kept, kinds kept, then quads: job ID, rank (`RANK`: 0 waiting, 1 queued, 2 in
-- progress, 3 completed), its state's time, its JSON.
-- Returns 'duplicate', 'stale', or the number of jobs whose state moved.
local now, oldest, cap, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local delivery, kind, kinds_kept = ARGV[5], ARGV[6], tonumber(ARGV[9])
local FIRST_JOB = 10
if delivery ~= '' then
  -- One whose state is stale is refused before its signature is kept, so a retry is refused the
  -- same way.
  if #ARGV >= FIRST_JOB and tonumber(ARGV[FIRST_JOB + 2]) < oldest then return 'stale' end
  if not redis.call('SET', KEYS[5], now, 'NX', 'EX', ARGV[7]) then return 'duplicate' end
  -- The kind is the sender's word (an event's name is not signed): past the kinds kept, a new
  -- one is counted as 'other', and the last arrivals keep the hour they are read over and the
  -- newest kinds, so neither grows whatever is sent.
  if redis.call('HEXISTS', KEYS[7], kind) == 0 and redis.call('HLEN', KEYS[7]) >= kinds_kept then
    kind = 'other'
  end
  redis.call('HINCRBY', KEYS[7], kind, 1)
  redis.call('EXPIRE', KEYS[7], ARGV[8])
  redis.call('ZADD', KEYS[6], now, kind)
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', '(' .. (tonumber(now) - 3600))
  redis.call('ZREMRANGEBYRANK', KEYS[6], 0, -kinds_kept - 1)
  redis.call('EXPIRE', KEYS[6], keep)
end
local RANKS = {waiting = 0, queued = 1, in_progress = 2, completed = 3}
local function rank_of(raw)
  local ok, job = pcall(cjson.decode, raw)
  return ok and type(job) == 'table' and RANKS[job.status] or -1
end
local moved = 0
for i = FIRST_JOB, #ARGV, 4 do
  local id, rank, at, json = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), ARGV[i + 3]
  if at < oldest then
    if delivery ~= '' then return 'stale' end
  elseif redis.call('HEXISTS', KEYS[3], id) == 0 then
    local live = redis.call('HGET', KEYS[1], id)
    if not live or rank >= rank_of(live) then
      if rank == 3 then
        redis.call('HDEL', KEYS[1], id)
        redis.call('ZREM', KEYS[2], id)
        redis.call('HSET', KEYS[3], id, json)
        redis.call('ZADD', KEYS[4], at, id)
      else
        redis.call('HSET', KEYS[1], id, json)
        redis.call('ZADD', KEYS[2], at, id)
      end
      moved = moved + 1
    end
  end
end
-- Each hash keeps the span and the cap: what falls out goes a hundred at a time, so one call
-- never does a day's work.
for k = 1, 3, 2 do
  local old = redis.call('ZRANGEBYSCORE', KEYS[k + 1], '-inf', '(' .. oldest, 'LIMIT', 0, 100)
  local over = redis.call('ZCARD', KEYS[k + 1]) - #old - cap
  if over > 0 then
    for _, id in ipairs(redis.call('ZRANGE', KEYS[k + 1], #old, #old + math.min(over, 100) - 1)) do
      old[#old + 1] = id
    end
  end
  if #old > 0 then
    redis.call('HDEL', KEYS[k], unpack(old))
    redis.call('ZREM', KEYS[k + 1], unpack(old))
  end
  redis.call('EXPIRE', KEYS[k], keep)
  redis.call('EXPIRE', KEYS[k + 1], keep)
end
return moved
