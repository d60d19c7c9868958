-- park: the worker stops holding a slot for a task that still waits for input. The job ends;
-- answer.lua re-enqueues the task once everything is answered.
-- KEYS[1] task, KEYS[2] inputs, KEYS[3] due zset (named `unclaimed`), KEYS[4] stats;
-- ARGV[1] ref, ARGV[2] gen
-- returns 'PARKED' | 'ANSWERED' (nothing outstanding: go on in place) | 'GONE' | 'SUPERSEDED' | 'TERMINAL'
local bad, cur = fence(KEYS[1], ARGV[2], 'expire_at')
if bad then return bad end
-- The last answer may have arrived between the run's poll and this script: then there is
-- nothing to wait for, and parking would strand the task (no answer left to resume it).
if redis.call('HLEN', KEYS[2]) == 0 then return 'ANSWERED' end
redis.call('HSET', KEYS[1], 'parked', 1, 'lease', 0)
-- No deadline (answer.lua re-arms it): in the due index only for its expiry, if it has one.
local expiry = due_at(nil, cur[3])
if expiry then redis.call('ZADD', KEYS[3], expiry, ARGV[1]) else redis.call('ZREM', KEYS[3], ARGV[1]) end
stat('parked', 1)
return 'PARKED'
