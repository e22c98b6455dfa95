-- Commit a step (or a suspension of one), fenced: only if the run is still at the
-- expected step, phase and status.
-- KEYS[1] run hash, KEYS[2] transcript stream, KEYS[3] path list
-- ARGV[1] expected step, ARGV[2] expected phase, ARGV[3] expected status,
-- ARGV[4] new step, ARGV[5] new phase, ARGV[6] new status,
-- ARGV[7] snapshot JSON (without state and path), ARGV[8] state JSON, ARGV[9] updated_at (ms),
-- ARGV[10] number k of transcript records, ARGV[11..10+k] records (JSON),
-- ARGV[11+k..] nodes to append to the path
-- Returns {1} when committed, {0, current step, current status, current phase} when fenced off.
local current = redis.call('HMGET', KEYS[1], 'step', 'status', 'phase')
local phase = current[3] or '0'
if current[1] ~= ARGV[1] or current[2] ~= ARGV[3] or phase ~= ARGV[2] then
  return {0, current[1] or '', current[2] or '', phase}
end
redis.call('HSET', KEYS[1], 'step', ARGV[4], 'phase', ARGV[5], 'status', ARGV[6],
  'snapshot', ARGV[7], 'state', ARGV[8], 'updated_at', ARGV[9])
local k = tonumber(ARGV[10])
for i = 11, 10 + k do
  redis.call('XADD', KEYS[2], '*', 'r', ARGV[i])
end
for i = 11 + k, #ARGV do
  redis.call('RPUSH', KEYS[3], ARGV[i])
end
return {1}
