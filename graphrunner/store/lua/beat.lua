-- Record a heartbeat on a run that exists (never re-creates an expired or deleted run).
-- KEYS[1] run hash; ARGV[1] now (ms)
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'heartbeat', ARGV[1])
end
return 0
