-- Take a concurrency key for a run, or queue the run behind its holder, or refuse.
-- KEYS[1] holder (string), KEYS[2] waiting runs (list); ARGV[1] run id, ARGV[2] "queue" | "refuse"
-- Returns {"acquired"}, {"queued", holder} or {"refused", holder}.
local holder = redis.call('GET', KEYS[1])
if not holder or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1])
  return {'acquired'}
end
if ARGV[2] ~= 'queue' then
  return {'refused', holder}
end
if not redis.call('LPOS', KEYS[2], ARGV[1]) then
  redis.call('RPUSH', KEYS[2], ARGV[1])
end
return {'queued', holder}
