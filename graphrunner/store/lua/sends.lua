-- (library, prepended to the scripts that send or acknowledge) Send messages: push onto a queue,
-- arm a durable timer, or keep in the run's outbox; record the run's tracked message.
-- ARGV from `first`: n, then per send: mode (push | timer | outbox | gather | gather_outbox),
-- due (ms; for a gather mode, the TTL in s of the ended set), tag, entry, tracked (1 | 0),
-- queue, and for a gather mode two more: member (a child run id, or ''), the flag's TTL (s).
-- KEYS from `key`, in the order of the sends: the queue of each push; for a gather mode the
-- parent step's ended set and its wake-up flag, then (gather) the queue.
-- A gather send is a parent step's wake-up: `member` joins the step's ended set, and the
-- message goes (onto the queue, or into the outbox) only when the flag was not set.
-- Returns the index after the sends' arguments.
local function send_all(first, key, run, timers, bodies, outbox, now)
  local n = tonumber(ARGV[first])
  local i = first + 1
  for _ = 1, n do
    local mode, due, tag, entry = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    local width = 6
    if mode == 'push' then
      redis.call('LPUSH', KEYS[key], entry)
      key = key + 1
    elseif mode == 'timer' then
      redis.call('HSET', bodies, tag, entry)
      redis.call('ZADD', timers, due, tag)
    elseif mode == 'gather' or mode == 'gather_outbox' then
      local member = ARGV[i + 6]
      if member ~= '' then
        redis.call('SADD', KEYS[key], member)
        redis.call('EXPIRE', KEYS[key], due)
      end
      local pending = not redis.call('SET', KEYS[key + 1], tag, 'NX', 'EX', ARGV[i + 7])
      key = key + 2
      if mode == 'gather' then
        if not pending then
          redis.call('LPUSH', KEYS[key], entry)
        end
        key = key + 1
      elseif not pending then
        redis.call('RPUSH', outbox, entry)
      end
      width = 8
    else
      redis.call('RPUSH', outbox, entry)
    end
    if ARGV[i + 4] == '1' and run then
      redis.call('HSET', run, 'sent_tag', tag, 'sent_queue', ARGV[i + 5], 'sent_at', now)
    end
    i = i + width
  end
  return i
end

-- Acknowledge the message tagged `tag` ('' or nil: none) in kombu's Redis layout: it leaves the
-- sorted set `index` and the hash `unacked` of delivered messages, so it is never restored.
local function acknowledge(tag, index, unacked)
  if tag ~= nil and tag ~= '' then
    redis.call('ZREM', index, tag)
    redis.call('HDEL', unacked, tag)
  end
end
