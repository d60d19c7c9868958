-- release: a worker that shuts down hands its run back at once (no wait for the lease).
-- KEYS[1] task, KEYS[2] leases, KEYS[3] unclaimed; ARGV[1] ref, ARGV[2] gen
-- returns 'OK' | 'GONE' | 'SUPERSEDED' | 'TERMINAL'
local bad, cur = fence(KEYS[1], ARGV[2], 'expire_at')
if bad then return bad end
redis.call('HSET', KEYS[1], 'lease', 0)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], due_at(now, cur[3]), ARGV[1])
return 'OK'
