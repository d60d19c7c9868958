-- report: the running tool sets statusMessage; `reports` counts them (progress notifications).
-- KEYS[1] task; ARGV[1] gen, ARGV[2] message
-- returns 'OK' or 'GONE' | 'SUPERSEDED' | 'TERMINAL'
-- The fence (see fence() in the prelude), inlined: one read for it and for what follows.
local cur = redis.call('HMGET', KEYS[1], 'gen', 'status', 'reports', 'push')
if not cur[1] then return 'GONE' end
if cur[1] ~= ARGV[1] then return 'SUPERSEDED' end
if TERMINAL[cur[2]] then return 'TERMINAL' end
redis.call('HSET', KEYS[1], 'msg', ARGV[2], 'updated_ms', now,
           'reports', (tonumber(cur[3]) or 0) + 1)
redis.call('PUBLISH', KEYS[1] .. ':ev', KEYS[1])  -- publish(), with `push` read above
if cur[4] then redis.call('PUBLISH', cur[4], KEYS[1]) end
return 'OK'
