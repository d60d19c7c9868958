-- cancel (tasks/cancel): a non-terminal task becomes `cancelled`; outstanding input requests are
-- cleared so a racing tasks/update cannot resume it; a waiting or sleeping worker is woken.
-- KEYS[1] task, KEYS[2] inputs, KEYS[3] wake channel, KEYS[4] due zset (named `unclaimed`),
-- KEYS[5] active zset, KEYS[6] stats; ARGV[1] owner, ARGV[2] ref,
-- ARGV[3] statusMessage
-- returns {'CANCELLED', 1 if a worker holds a live lease else 0, trace} | {'TERMINAL', 0, trace}
--         | {'NOTFOUND'}; trace: the create's traceparent ('' when untraced), for the span of
--         the cancelling request (a link to the task's trace)
local cur = redis.call('HMGET', KEYS[1], 'owner', 'status', 'lease', 'tool', 'parked', 'watch',
                      'sync', 'push', 'trace')
if not cur[1] or cur[1] ~= ARGV[1] then return {'NOTFOUND'} end
local trace = cur[9] or ''
if TERMINAL[cur[2]] then return {'TERMINAL', 0, trace} end
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'msg', ARGV[3], 'updated_ms', now,
           'parked', 0)
if cur[2] == 'input_required' then stat('state:input_required', -1) end
stat('cancelled:' .. cur[4], 1)
if cur[5] == '1' then stat('parked', -1) end
stat('inputs', -redis.call('HLEN', KEYS[2]))
-- Outstanding requests go in the same step as the status: a tasks/update racing this cancel
-- then finds nothing to answer (IGNORED) and cannot make the task working again.
redis.call('DEL', KEYS[2])
publish(KEYS[1], cur[6], cur[7], cur[8])
redis.call('PUBLISH', KEYS[3], 'cancel')  -- wakes the run wherever it waits
redis.call('ZREM', KEYS[4], ARGV[2]); redis.call('ZREM', KEYS[5], ARGV[2])
local live = 0
if tonumber(cur[3]) > now then live = 1 end
return {'CANCELLED', live, trace}
