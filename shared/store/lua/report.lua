-- report: the running tool sets statusMessage; `reports` counts them (progress notifications).
-- KEYS[1] task; ARGV[1] gen, ARGV[2] message
-- returns 'OK' or 'GONE' | 'SUPERSEDED' | 'TERMINAL'
local bad, cur = fence(KEYS[1], ARGV[1], 'reports', 'push')
if bad then return bad end
redis.call('HSET', KEYS[1], 'msg', ARGV[2], 'updated_ms', now,
           'reports', (tonumber(cur[3]) or 0) + 1)
publish(KEYS[1], cur[4])
return 'OK'
