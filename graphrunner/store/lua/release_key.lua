-- Hand a concurrency key on from a run that has finished to the next waiting run.
-- KEYS[1] holder (string), KEYS[2] waiting runs (list); ARGV[1] run id
-- Returns the next run's id (now the holder), or false when the key is free or held by another.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return false
end
local next_run = redis.call('LPOP', KEYS[2])
if next_run then
  redis.call('SET', KEYS[1], next_run)
  return next_run
end
redis.call('DEL', KEYS[1])
return false
