-- Commit a step (or a suspension of one), fenced: only if the run is still at the expected
-- step, phase and status. In one atomic write: the run record and state, the transcript
-- records, the path, the status indexes and the expiry of a finished run, the sweeper's
-- progress deadline, and the messages the commit sends (see sends.lua).
-- KEYS[1] run hash, [2] transcript stream, [3] path list, [4] progress zset, [5] timers zset,
-- [6] timer bodies hash, [7] outbox list, [8] old status index, [9] new status index,
-- [10] old status+graph index, [11] new status+graph index, [12] expiry index, [13..] queues,
-- then, when the commit acknowledges a message, kombu's unacked index and unacked hash,
-- then (the last two) the run's waiters counter and settle list (see watch_run.lua)
-- ARGV[1] run id, [2..4] expected step, phase, status, [5..7] new step, phase, status,
-- [8] snapshot JSON (without state and path), [9] state JSON, [10] now (ms),
-- [11] progress deadline (ms; '' when the run is no longer running), [12] retention (s),
-- [13] expiry member, then k and k transcript records, then w and w nodes walked, then sends,
-- then the delivery tag of the message the commit acknowledges ('' for none), then the run's
-- history budget (bytes) and h and h history side records: per record, the index (1-based) of
-- the transcript record it belongs to, its step, and its JSON (kept as the run hash's field
-- 'h:<entry id>' while the run's history is within its budget; RedisStore.history reads them)
-- A transcript entry is {r = record}, plus {s = new status} when the commit leaves the run not
-- running (finished, paused, pending).
-- Returns {1} when committed, {0, current step, current status, current phase}
-- when fenced off.
local run = KEYS[1]
local current = redis.call('HMGET', run, 'step', 'status', 'phase')
local phase = current[3] or '0'
if current[1] ~= ARGV[2] or current[2] ~= ARGV[4] or phase ~= ARGV[3] then
  return {0, current[1] or '', current[2] or '', phase}
end
local now = ARGV[10]
redis.call('HSET', run, 'step', ARGV[5], 'phase', ARGV[6], 'status', ARGV[7],
  'snapshot', ARGV[8], 'state', ARGV[9], 'updated_at', now)
local i = 14
local k = tonumber(ARGV[i])
local stopped = ARGV[7] ~= 'running'  -- its records say so ('s'): a follower reads no status
local ids = {}
for j = i + 1, i + k do
  if stopped then
    ids[j - i] = redis.call('XADD', KEYS[2], '*', 'r', ARGV[j], 's', ARGV[7])
  else
    ids[j - i] = redis.call('XADD', KEYS[2], '*', 'r', ARGV[j])
  end
end
i = i + k + 1
local w = tonumber(ARGV[i])
for j = i + 1, i + w do
  redis.call('RPUSH', KEYS[3], ARGV[j])
end
i = i + w + 1
i = send_all(i, 13, run, KEYS[5], KEYS[6], KEYS[7], now)
acknowledge(ARGV[i], KEYS[#KEYS - 3], KEYS[#KEYS - 2])
local h = tonumber(ARGV[i + 2] or '0')
if h > 0 then  -- history side records: only while the run keeps history within its budget
  local kept = redis.call('HMGET', run, 'history_bytes', 'history_full')
  local used, budget = tonumber(kept[1] or '-1'), tonumber(ARGV[i + 1])
  if used >= 0 and not kept[2] then
    for j = i + 3, i + 3 * h, 3 do
      local body = ARGV[j + 2]
      if used + #body > budget then
        redis.call('HSET', run, 'history_full', ARGV[j + 1])
        break
      end
      redis.call('HSET', run, 'h:' .. ids[tonumber(ARGV[j])], body)
      used = used + #body
    end
    redis.call('HSET', run, 'history_bytes', used)
  end
end
if ARGV[11] == '' then
  redis.call('ZREM', KEYS[4], ARGV[1])
else
  redis.call('ZADD', KEYS[4], ARGV[11], ARGV[1])
end
local old, new = ARGV[4], ARGV[7]
if old ~= new then
  local created = redis.call('HGET', run, 'created_at') or now
  redis.call('ZREM', KEYS[8], ARGV[1])
  redis.call('ZREM', KEYS[10], ARGV[1])
  redis.call('ZADD', KEYS[9], created, ARGV[1])
  redis.call('ZADD', KEYS[11], created, ARGV[1])
  local finished = {completed = true, completed_with_errors = true, failed = true, cancelled = true}
  if finished[new] then
    local retention = tonumber(ARGV[12])
    for j = 1, 3 do
      redis.call('EXPIRE', KEYS[j], retention)
    end
    redis.call('ZADD', KEYS[12], tonumber(now) + retention * 1000, ARGV[13])
  elseif finished[old] then
    for j = 1, 3 do
      redis.call('PERSIST', KEYS[j])
    end
    redis.call('ZREM', KEYS[12], ARGV[13])
  end
  if finished[new] or new == 'paused' then  -- settled: wake the clients waiting for it, once each
    local waiters, settle = KEYS[#KEYS - 1], KEYS[#KEYS]
    local waiting = math.min(tonumber(redis.call('GET', waiters) or '0') or 0, 1000)
    if waiting > 0 then
      redis.call('DEL', waiters)
      for _ = 1, waiting do
        redis.call('RPUSH', settle, new)
      end
      redis.call('EXPIRE', settle, 60)  -- what a client that gave up left
    end
  end
end
return {1}
