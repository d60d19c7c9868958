-- answer (tasks/update): store answers for outstanding keys; others are ignored. When nothing
-- is outstanding any more the task is working again, and its worker is woken or re-enqueued.
-- KEYS[1] task, KEYS[2] inputs, KEYS[3] answers, KEYS[4] wake channel, KEYS[5] unclaimed zset,
-- KEYS[6] stats hash
-- ARGV[1] owner, ARGV[2] ref, ARGV[3] unclaimed bound ms, ARGV[4..] key/answer pairs
-- returns {'NOTFOUND' | 'IGNORED' | 'PARTIAL' | 'WOKEN'} or {'RESUME', tool, queue}
local cur = redis.call('HMGET', KEYS[1], 'owner', 'status', 'parked', 'tool', 'queue', 'watch',
                      'sync', 'push', 'expire_at')
if not cur[1] or cur[1] ~= ARGV[1] then return {'NOTFOUND'} end
if cur[2] ~= 'input_required' then return {'IGNORED'} end
local applied = 0
-- Only keys still outstanding count (HDEL says so): a replayed or racing answer to a key
-- answered already is ignored, so the first answer is the one the tool sees.
for i = 4, #ARGV, 2 do
  if redis.call('HDEL', KEYS[2], ARGV[i]) == 1 then
    redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
    applied = applied + 1
  end
end
if applied == 0 then return {'IGNORED'} end
expire_with_task(KEYS[1], KEYS[3])
stat('inputs', -applied)
-- `answered`: the answers hash exists (claim.lua reads it only then).
redis.call('HSET', KEYS[1], 'updated_ms', now, 'answered', 1)
-- Wake the run waiting for these answers (its process subscribes to the task's wake channel).
redis.call('PUBLISH', KEYS[4], 'answer')
if redis.call('HLEN', KEYS[2]) > 0 then publish(KEYS[1], cur[6], cur[7], cur[8]); return {'PARTIAL'} end
-- Working again: any status text of the input_required state is not shown any more.
redis.call('HSET', KEYS[1], 'status', 'working', 'msg', '')
publish(KEYS[1], cur[6], cur[7], cur[8])
stat('state:input_required', -1)
-- A parked task has no run to wake: it goes back on the unclaimed watch list here, in the
-- same step, so a web process that dies before enqueueing it is covered by the sweeper.
if cur[3] == '1' then
  redis.call('HSET', KEYS[1], 'parked', 0)
  stat('parked', -1)
  redis.call('ZADD', KEYS[5], due_at(now + tonumber(ARGV[3]), cur[9]), ARGV[2])
  return {'RESUME', cur[4], cur[5]}
end
return {'WOKEN'}
