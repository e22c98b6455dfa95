-- Pause (ARGV[2] '1') or resume ('0') a schedule. Ticks while paused never fire: a resumed schedule
-- goes on from ARGV[3] (now, s) and is looked at on the next pass.
-- KEYS[1] schedule (hash), KEYS[2] due (zset)
-- ARGV[1] id, ARGV[2] '1' | '0', ARGV[3] now (s), ARGV[4] now (ms)
-- Returns 1, or 0 for an unknown schedule.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], 'paused', '1')
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 1
end
if redis.call('HGET', KEYS[1], 'paused') == '1' then
  redis.call('HSET', KEYS[1], 'paused', '0')
  if tonumber(redis.call('HGET', KEYS[1], 'claimed')) < tonumber(ARGV[3]) then
    redis.call('HSET', KEYS[1], 'claimed', ARGV[3])
  end
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
end
return 1
