-- Count a client in as waiting for a run to settle (finish or pause), unless it has already:
-- the commit that settles the run pushes one element per client counted onto its settle list
-- (commit_run.lua), where each waiting client takes one (BLPOP).
-- KEYS[1] run hash, [2] waiters counter. ARGV[1] the counter's TTL (s).
-- Returns the run's status ('' for an unknown run).
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'running' or status == 'pending' then
  if redis.call('INCR', KEYS[2]) < 1 then  -- a client that gave up took itself out late
    redis.call('SET', KEYS[2], 1)
  end
  redis.call('EXPIRE', KEYS[2], ARGV[1])
end
return status or ''
