-- Records runner pods' OOM kills (`bot.storage.fleet`) once per (pod, uid); a kill first seen
-- unnamed takes its workflow once a reading names it. Kills older than the span kept, then the
-- oldest past the cap, are dropped.
-- KEYS: the kills hash (field -> {t, w, at}), its index by time. ARGV: now (epoch s), oldest kept
-- (epoch s), cap, seconds the keys live, then triples: field, runner type, workflow.
-- Returns each field's stored workflow, in order.
local now, oldest, cap, keep = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
local stored = {}
for i = 5, #ARGV, 3 do
  local field, workflow = ARGV[i], ARGV[i + 2]
  local raw = redis.call('HGET', KEYS[1], field)
  local kill = raw and cjson.decode(raw)
  if not kill then
    kill = {t = ARGV[i + 1], w = workflow, at = now}
    redis.call('HSET', KEYS[1], field, cjson.encode(kill))
    redis.call('ZADD', KEYS[2], now, field)
  elseif kill.w == '' and workflow ~= '' then
    kill.w = workflow
    redis.call('HSET', KEYS[1], field, cjson.encode(kill))
  end
  stored[#stored + 1] = kill.w
end
local function drop(fields)
  for _, field in ipairs(fields) do redis.call('HDEL', KEYS[1], field) end
end
drop(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. oldest))
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. oldest)
local over = redis.call('ZCARD', KEYS[2]) - cap
if over > 0 then
  drop(redis.call('ZRANGE', KEYS[2], 0, over - 1))
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)
end
for k = 1, 2 do redis.call('EXPIRE', KEYS[k], keep) end
return stored
