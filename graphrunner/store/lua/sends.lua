-- (library, prepended to the scripts that send) Send messages: push onto a queue, arm a
-- durable timer, or keep in the run's outbox; record the run's tracked message.
-- ARGV from `first`: n, then per send: mode (push | timer | outbox), due (ms), tag, entry,
-- tracked (1 | 0), queue. KEYS from `key`: the queue of each push, in order.
-- Returns the index after the sends' arguments.
local function send_all(first, key, run, timers, bodies, outbox, now)
  local n = tonumber(ARGV[first])
  local i = first + 1
  for _ = 1, n do
    local mode, due, tag, entry = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    if mode == 'push' then
      redis.call('LPUSH', KEYS[key], entry)
      key = key + 1
    elseif mode == 'timer' then
      redis.call('HSET', bodies, tag, entry)
      redis.call('ZADD', timers, due, tag)
    else
      redis.call('RPUSH', outbox, entry)
    end
    if ARGV[i + 4] == '1' and run then
      redis.call('HSET', run, 'sent_tag', tag, 'sent_queue', ARGV[i + 5], 'sent_at', now)
    end
    i = i + 6
  end
  return i
end
