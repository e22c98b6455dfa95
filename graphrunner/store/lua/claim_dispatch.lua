-- Claim the sending of what the suspension at `phase` waits for: once per phase.
-- KEYS[1] run hash; ARGV[1] phase. Returns 1 when claimed now, 0 when claimed before.
local last = tonumber(redis.call('HGET', KEYS[1], 'dispatched') or '-1')
if last >= tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'dispatched', ARGV[1])
return 1
