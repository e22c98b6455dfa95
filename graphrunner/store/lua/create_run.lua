-- Create a run unless one exists: its record, its index entries, the sweeper's progress
-- deadline and its first messages (see sends.lua), in one atomic write.
-- KEYS[1] run hash, [2] all-runs index, [3] graph index, [4] status index,
-- [5] status+graph index, [6] progress zset, [7] timers zset, [8] timer bodies hash,
-- [9] outbox list, [10..] queues
-- ARGV[1] run id, [2] fingerprint, [3] status, [4] step, [5] snapshot JSON (without state),
-- [6] state JSON, [7] graph id, [8] created_at (ms), [9] progress deadline (ms, or ''),
-- [10] phase (the commit fence, as in the snapshot), [11] where the run's history starts
-- (JSON: node, step, graph hash; kept with the state as the run's initial state), '' to keep no
-- history, 'full' when the initial state alone is over the history budget, then sends
-- Returns {1} when created, {0, fingerprint} when the run already existed.
local run = KEYS[1]
local existing = redis.call('HGET', run, 'fingerprint')
if existing then
  return {0, existing}
end
local now = ARGV[8]
redis.call('HSET', run,
  'fingerprint', ARGV[2], 'status', ARGV[3], 'step', ARGV[4], 'phase', ARGV[10],
  'snapshot', ARGV[5], 'state', ARGV[6], 'graph_id', ARGV[7],
  'created_at', now, 'updated_at', now)
if ARGV[11] == 'full' then
  redis.call('HSET', run, 'history_full', ARGV[4])
elseif ARGV[11] ~= '' then
  redis.call('HSET', run, 'initial', ARGV[6], 'initial_at', ARGV[11], 'history_bytes', #ARGV[6])
end
for j = 2, 5 do
  redis.call('ZADD', KEYS[j], now, ARGV[1])
end
if ARGV[9] ~= '' then
  redis.call('ZADD', KEYS[6], ARGV[9], ARGV[1])
end
send_all(12, 10, run, KEYS[7], KEYS[8], KEYS[9], now)
return {1}
