-- Commit one step, fenced: only if the run is still at the expected step and running.
-- KEYS[1] run hash, KEYS[2] transcript stream, KEYS[3] path list
-- ARGV[1] expected step, ARGV[2] new step, ARGV[3] new status,
-- ARGV[4] snapshot JSON (without state and path), ARGV[5] state JSON,
-- ARGV[6] transcript record JSON, ARGV[7] updated_at (ms), ARGV[8..] nodes to append to the path
-- Returns {1, stream id} when committed, {0, current step, current status} when fenced off.
local current = redis.call('HMGET', KEYS[1], 'step', 'status')
if current[1] ~= ARGV[1] or current[2] ~= 'running' then
  return {0, current[1] or '', current[2] or ''}
end
redis.call('HSET', KEYS[1], 'step', ARGV[2], 'status', ARGV[3],
  'snapshot', ARGV[4], 'state', ARGV[5], 'updated_at', ARGV[7])
for i = 8, #ARGV do
  redis.call('RPUSH', KEYS[3], ARGV[i])
end
local id = redis.call('XADD', KEYS[2], '*', 'r', ARGV[6])
return {1, id}
