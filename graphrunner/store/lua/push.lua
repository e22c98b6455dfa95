-- Send messages that no commit carries (a producer's, a sweeper's re-send), see sends.lua.
-- KEYS[1] timers zset, [2] timer bodies hash, [3] the run's outbox list, [4] the run hash,
-- [5..] queues
-- ARGV[1] now (ms), then sends; a tracked send is recorded on the run, if it exists
local run = nil
if redis.call('EXISTS', KEYS[4]) == 1 then
  run = KEYS[4]
end
send_all(2, 5, run, KEYS[1], KEYS[2], KEYS[3], ARGV[1])
return 1
