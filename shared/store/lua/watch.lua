-- watch: mark tasks watched: their changes are published on their channels from now on (see
-- publish in _prelude.lua). The watcher subscribed first and reads the tasks after this.
-- KEYS task hashes (of one slot)
-- returns how many were marked (gone, ended or marked already: skipped)
local marked = 0
for _, key in ipairs(KEYS) do
  local cur = redis.call('HMGET', key, 'status', 'watch', 'sync')
  -- A task that is gone must not come back as a hash holding one field (and no TTL).
  if cur[1] and not TERMINAL[cur[1]] and cur[2] ~= '1' and cur[3] ~= '1' then
    redis.call('HSET', key, 'watch', 1)
    marked = marked + 1
  end
end
return marked
