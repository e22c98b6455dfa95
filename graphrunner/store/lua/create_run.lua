-- Create a run record unless one exists.
-- KEYS[1] run hash, KEYS[2] transcript stream
-- ARGV[1] fingerprint (graph hash + inputs), ARGV[2] status, ARGV[3] step,
-- ARGV[4] snapshot JSON (without state), ARGV[5] state JSON, ARGV[6] graph id,
-- ARGV[7] created_at (ms)
-- Returns {1} when created, {0, fingerprint} when the run already existed.
local existing = redis.call('HGET', KEYS[1], 'fingerprint')
if existing then
  return {0, existing}
end
redis.call('HSET', KEYS[1],
  'fingerprint', ARGV[1], 'status', ARGV[2], 'step', ARGV[3], 'phase', '0',
  'snapshot', ARGV[4], 'state', ARGV[5], 'graph_id', ARGV[6],
  'created_at', ARGV[7], 'updated_at', ARGV[7])
return {1}
