-- Delete what is left of a run whose record has expired, if it has.
-- KEYS[1] run hash, KEYS[2] transcript stream, KEYS[3] path list (one hash slot)
-- Returns -2 when the record is gone (its transcript and path are deleted too), else the
-- record's PTTL in ms (-1: it no longer expires, the run was resumed).
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -2 then
  redis.call('DEL', KEYS[2], KEYS[3])
end
return ttl
