-- park: the worker stops holding a slot for a task that still waits for input. The job ends;
-- answer.lua re-enqueues the task once everything is answered.
-- KEYS[1] task, KEYS[2] inputs, KEYS[3] due zset (named `unclaimed`), KEYS[4] stats;
-- ARGV[1] ref, ARGV[2] gen
-- returns 'PARKED' | 'ANSWERED' (nothing outstanding: go on in place) | 'GONE' | 'SUPERSEDED' | 'TERMINAL'
local bad = fence(KEYS[1], ARGV[2])
if bad then return bad end
-- The last answer may have arrived between the run's poll and this script: then there is
-- nothing to wait for, and parking would strand the task (no answer left to resume it).
if redis.call('HLEN', KEYS[2]) == 0 then return 'ANSWERED' end
redis.call('HSET', KEYS[1], 'parked', 1, 'lease', 0)
redis.call('ZREM', KEYS[3], ARGV[1])  -- no deadline: answer.lua re-arms it
stat('parked', 1)
return 'PARKED'
