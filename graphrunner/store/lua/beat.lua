-- Record a heartbeat on a run that exists (never re-creates an expired or deleted run), and
-- push the sweeper's progress deadline of a running run on.
-- KEYS[1] run hash, [2] progress zset; ARGV[1] now (ms), [2] run id, [3] progress deadline (ms)
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'heartbeat', ARGV[1])
  redis.call('ZADD', KEYS[2], 'XX', 'GT', ARGV[3], ARGV[2])
end
return 0
