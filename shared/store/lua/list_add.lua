-- list_add: remember a task in a tasks/list scope (the 2025-11-25 wire), with its taskId, which
-- tasks/list must hand back to the scope's owner.
-- Its changes are published on the scope's channel from now on (the task's `push` field).
-- KEYS[1] listing zset, KEYS[2] listing ids hash, KEYS[3] task hash
-- ARGV[1] ref, ARGV[2] taskId, ARGV[3] createdAt (ms), ARGV[4] ttl ms ('' = unlimited),
-- ARGV[5] the scope's channel
-- returns 1
local existed = redis.call('EXISTS', KEYS[1]) == 1
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[3], 'push', ARGV[5])
-- The index lives as long as its longest-lived task, never shorter: an unlimited task keeps it
-- (entries whose task is gone leave when a listing finds them). PTTL -1 on an index that
-- existed before means an unlimited task is in it already.
for _, key in ipairs({KEYS[1], KEYS[2]}) do
  if ARGV[4] == '' then
    redis.call('PERSIST', key)
  else
    local left = redis.call('PTTL', key)
    if (not existed) or (left >= 0 and left < tonumber(ARGV[4])) then
      redis.call('PEXPIRE', key, ARGV[4])
    end
  end
end
return 1
