-- mark_enqueued: the job message is with the broker. The task stays on the unclaimed watch list
-- with a longer deadline, so a message that no worker ever starts is sent again by the sweeper:
-- with kombu's Redis transport, a worker killed after taking a message and before its run claimed
-- the task leaves that message in kombu's unacked set until the visibility timeout (a week).
-- The n-th send of a run not yet started waits ARGV[2] * 2^(n-1) ms (at most 2^10 times): in a
-- backlog "not started yet" is normal, and each re-send adds a (harmless, fenced) message.
-- claim resets the count and replaces the deadline with its lease's.
-- KEYS[1] task, KEYS[2] due zset (named `unclaimed`); ARGV[1] ref, ARGV[2] base ms
-- returns 1, or 0 when there is nothing to watch (claimed already, or gone)
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 0 end
local cur = redis.call('HMGET', KEYS[1], 'lease', 'expire_at')
if not cur[1] then return 0 end
-- Claimed: the task's deadline in the index is its lease now, not to be moved.
if tonumber(cur[1]) > 0 then return 0 end
local sends = redis.call('HINCRBY', KEYS[1], 'sends', 1)
local wait = tonumber(ARGV[2]) * 2 ^ math.min(sends - 1, 10)
redis.call('ZADD', KEYS[2], 'XX', due_at(now + wait, cur[2]), ARGV[1])
return 1
