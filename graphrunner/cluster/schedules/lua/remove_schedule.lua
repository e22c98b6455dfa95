-- Remove a schedule and its tick records (the runs it started stay, as runs).
-- KEYS[1] schedule (hash), KEYS[2] ids, KEYS[3] due, KEYS[4] unsettled, KEYS[5] ticks, KEYS[6] log, KEYS[7] runs
-- ARGV[1] id. Returns 1, or 0 for an unknown schedule.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
for _, tick in ipairs(redis.call('HKEYS', KEYS[5])) do
  redis.call('ZREM', KEYS[4], ARGV[1] .. '\t' .. tick)
end
redis.call('DEL', KEYS[1], KEYS[5], KEYS[6], KEYS[7])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1
