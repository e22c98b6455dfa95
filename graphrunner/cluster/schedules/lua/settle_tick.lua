-- Record a claimed (or backfilled) tick's outcome; nothing for a schedule removed meanwhile.
-- KEYS[1] schedule (hash), KEYS[2] unsettled (zset), KEYS[3] ticks (hash), KEYS[4] log (zset), KEYS[5] runs (zset)
-- ARGV[1] id, ARGV[2] tick, ARGV[3] outcome JSON, ARGV[4] run id or '', ARGV[5] keep
-- Returns 1 when recorded, 0 when the schedule is gone.
redis.call('ZREM', KEYS[2], ARGV[1] .. '\t' .. ARGV[2])
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
record(KEYS[3], KEYS[4], KEYS[5], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]))
return 1
