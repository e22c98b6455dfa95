-- Record foreach items' results (the first record of an index wins), keep the items hash for a
-- while, and count them as progress of the run (see beat.lua).
-- KEYS[1] items hash, [2] run hash, [3] progress zset (one hash slot), then, when the write
-- acknowledges the item message, kombu's unacked index and unacked hash (the broker's Redis)
-- ARGV[1] items TTL (s), [2] now (ms), [3] run id, [4] progress deadline (ms; 0 leaves it),
-- [5] upto: the record count that completes the chunk in flight (0: none), [6] the delivery
-- tag of the message acknowledged ('' for none), then index, record JSON pairs
-- Returns {kept, completed}: how many records were new, and 1 when one of them made the hash
-- reach `upto` fields. Only a new field grows the hash, so a duplicate never completes a chunk
-- and exactly one save completes each chunk (its saver sends the join).
local kept, completed = 0, 0
local upto = tonumber(ARGV[5])
for i = 7, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then
    kept = kept + 1
    if upto > 0 and redis.call('HLEN', KEYS[1]) == upto then
      completed = 1
    end
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HSET', KEYS[2], 'heartbeat', ARGV[2])
  redis.call('ZADD', KEYS[3], 'XX', 'GT', ARGV[4], ARGV[3])
end
acknowledge(ARGV[6], KEYS[4], KEYS[5])
return {kept, completed}
