-- Record one foreach item's result (the first record of an index wins), keep the items hash
-- for a while, and count it as progress of the run (see beat.lua).
-- KEYS[1] items hash, [2] run hash, [3] progress zset (one hash slot)
-- ARGV[1] item index, [2] record JSON, [3] items TTL (s), [4] now (ms), [5] run id,
-- [6] progress deadline (ms; 0 leaves it)
-- Returns 1 when this record was kept, 0 when the index already had one.
local kept = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HSET', KEYS[2], 'heartbeat', ARGV[4])
  redis.call('ZADD', KEYS[3], 'XX', 'GT', ARGV[6], ARGV[5])
end
return kept
