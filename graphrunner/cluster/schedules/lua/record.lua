-- Shared by the schedule scripts (prepended to them): record one tick's outcome, keep the newest `keep`.
local function record(ticks, log, runs, tick, outcome, run_id, keep)
  redis.call('HSET', ticks, tick, outcome)
  redis.call('ZADD', log, tick, tick)
  if run_id ~= '' then
    redis.call('ZADD', runs, tick, run_id)
    redis.call('ZREMRANGEBYRANK', runs, 0, -(keep + 1))
  end
  local extra = redis.call('ZCARD', log) - keep
  if extra > 0 then
    local old = redis.call('ZRANGE', log, 0, extra - 1)
    redis.call('ZREMRANGEBYRANK', log, 0, extra - 1)
    redis.call('HDEL', ticks, unpack(old))
  end
end
