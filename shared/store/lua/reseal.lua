-- reseal (`mcpq keys rotate-data`): write values re-encrypted under the current key back, each
-- only if the stored value is still the one that was read. Compare-and-set in one script: a run
-- or a client that wrote the field since the read (under the current key already) is never
-- overwritten with the older value, and a key that expired meanwhile is not brought back.
-- HSET keeps the key's TTL.
-- KEYS[1] a hash (a task, its inputs, answers or steps, a session)
-- ARGV[1..] triples: field, value read, new value
-- returns the number of values written (the others changed since the read)
local written = 0
for i = 1, #ARGV, 3 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
    written = written + 1
  end
end
return written
