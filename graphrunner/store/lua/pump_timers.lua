-- Take the durable timers that have come due: push each message onto its queue (when the
-- broker is this Redis, `push` is 1) or hand it back to be published, and drop the timer.
-- KEYS[1] timers zset, [2] timer bodies hash; ARGV[1] now (ms), [2] limit, [3] push (1 | 0)
-- Returns the entries (`<queue>\n<body>`) taken.
local due = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[2]))
local taken = {}
for _, tag in ipairs(due) do
  local entry = redis.call('HGET', KEYS[2], tag)
  redis.call('ZREM', KEYS[1], tag)
  redis.call('HDEL', KEYS[2], tag)
  if entry then
    if ARGV[3] == '1' then
      local cut = string.find(entry, '\n', 1, true)
      redis.call('LPUSH', string.sub(entry, 1, cut - 1), string.sub(entry, cut + 1))
    end
    table.insert(taken, entry)
  end
end
return taken
