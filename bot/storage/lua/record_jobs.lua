-- Counts the jobs of one five-minute slot not seen before (`bot.storage.fleet`).
-- KEYS: the slot's seen set, its arrivals hash, its durations hash. ARGV: expire-at (epoch s),
-- then triples: id, field, and "" for a queued job or the minutes of a finished one. A finished
-- job counts in the durations hash: its field (jobs) and the field with "\tm" (their minutes).
for i = 2, #ARGV, 3 do
  if redis.call('SADD', KEYS[1], ARGV[i]) == 1 then
    if ARGV[i + 2] == '' then
      redis.call('HINCRBY', KEYS[2], ARGV[i + 1], 1)
    else
      redis.call('HINCRBY', KEYS[3], ARGV[i + 1], 1)
      redis.call('HINCRBYFLOAT', KEYS[3], ARGV[i + 1] .. '\tm', ARGV[i + 2])
    end
  end
end
for k = 1, 3 do redis.call('EXPIREAT', KEYS[k], ARGV[1]) end  -- a key not made is left alone
return 0
