-- mark_enqueued: the job message is with the broker; the task leaves the unclaimed watch list.
-- KEYS[1] unclaimed zset; ARGV[1] ref; returns 1
redis.call('ZREM', KEYS[1], ARGV[1])
return 1
