-- report: the running tool sets statusMessage; `reports` counts them (progress notifications).
-- KEYS[1] task; ARGV[1] gen, ARGV[2] message
-- returns 'OK' or 'GONE' | 'SUPERSEDED' | 'TERMINAL'
local bad = fence(KEYS[1], ARGV[1])
if bad then return bad end
redis.call('HSET', KEYS[1], 'msg', ARGV[2], 'updated_ms', now)
redis.call('HINCRBY', KEYS[1], 'reports', 1)
publish(KEYS[1])
return 'OK'
