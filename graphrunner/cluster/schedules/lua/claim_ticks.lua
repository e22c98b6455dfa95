-- Claim a schedule's ticks up to ARGV[3], if no one claimed past ARGV[2] meanwhile (compare and set).
-- KEYS[1] schedule (hash), KEYS[2] due (zset), KEYS[3] unsettled (zset), KEYS[4] ticks (hash),
-- KEYS[5] log (zset), KEYS[6] runs (zset)
-- ARGV[1] id, ARGV[2] the last claimed tick read, ARGV[3] the new one, ARGV[4] next fire (ms),
-- ARGV[5] now (ms), ARGV[6] keep, ARGV[7] missed ticks not recorded one by one, ARGV[8] n missed,
-- then n pairs (tick, outcome JSON) of missed ticks, then the ticks to fire.
-- Returns 1 (claimed: the caller decides the ticks to fire), 0 (claimed by another), -1 (gone or paused).
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HGET', KEYS[1], 'paused') == '1' then
  return -1
end
if redis.call('HGET', KEYS[1], 'claimed') ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], 'claimed', ARGV[3])
if tonumber(ARGV[7]) > 0 then
  redis.call('HINCRBY', KEYS[1], 'missed', ARGV[7])
end
local keep, n = tonumber(ARGV[6]), tonumber(ARGV[8])
for i = 0, n - 1 do
  redis.call('HINCRBY', KEYS[1], 'missed', 1)
  record(KEYS[4], KEYS[5], KEYS[6], ARGV[9 + 2 * i], ARGV[10 + 2 * i], '', keep)
end
for i = 9 + 2 * n, #ARGV do
  record(KEYS[4], KEYS[5], KEYS[6], ARGV[i], '{"outcome":"claimed"}', '', keep)
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1] .. '\t' .. ARGV[i])
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
return 1
