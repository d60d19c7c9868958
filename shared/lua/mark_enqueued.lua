-- mark_enqueued: the job message is with the broker. The task stays on the unclaimed watch list,
-- with a longer deadline: a message that a worker reserved but never started (a stalled pool
-- process) is enqueued again by the sweeper. XX: a run that already claimed it stays off.
-- KEYS[1] unclaimed zset; ARGV[1] ref, ARGV[2] ms a worker has to start it; returns 1
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
return 1
