-- Add or update a schedule. A new one starts at ARGV[5] (no ticks before it fire); an update keeps
-- its claimed ticks and its paused flag, and is looked at on the next pass (its due time is now).
-- KEYS[1] schedule (hash), KEYS[2] ids (zset), KEYS[3] due (zset)
-- ARGV[1] id, ARGV[2] spec JSON, ARGV[3] graph id, ARGV[4] graph hash, ARGV[5] now (s),
-- ARGV[6] now (ms), ARGV[7] source, ARGV[8] paused ('1' | '0', for a new schedule),
-- ARGV[9] the runs' capabilities (JSON list; '' for the deployment's default)
-- Returns 'created', 'updated', or 'kept' (a graph's schedule never replaces one added at run time).
local source = redis.call('HGET', KEYS[1], 'source')
if source == 'api' and ARGV[7] == 'graph' then
  return 'kept'
end
redis.call('HSET', KEYS[1], 'spec', ARGV[2], 'graph_id', ARGV[3], 'graph_hash', ARGV[4], 'source', ARGV[7],
  'caps', ARGV[9])
local paused = redis.call('HGET', KEYS[1], 'paused')
local reply = 'updated'
if not source then
  redis.call('HSET', KEYS[1], 'claimed', ARGV[5], 'paused', ARGV[8], 'created_at', ARGV[6], 'missed', 0)
  redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
  paused, reply = ARGV[8], 'created'
end
if paused ~= '1' then
  redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1])
end
return reply
