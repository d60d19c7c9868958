-- finish: the run ends the task (completed with result, or failed with error). Fenced, so a
-- late or duplicate worker can never overwrite `cancelled` or a newer run.
-- KEYS[1] task, KEYS[2] inputs, KEYS[3] wake channel (unused), KEYS[4] leases, KEYS[5] unclaimed,
-- KEYS[6] active zset, KEYS[7] expiry zset, KEYS[8] stats
-- ARGV[1] ref, ARGV[2] gen, ARGV[3] status, ARGV[4] field, ARGV[5] payload,
-- ARGV[6] statusMessage ('' keeps the current one)
-- returns 'OK' | 'GONE' | 'SUPERSEDED' | 'TERMINAL'
-- The fence (see fence() in the prelude), inlined: one read for it and for what follows.
local cur = redis.call('HMGET', KEYS[1], 'gen', 'status', 'tool', 'push', 'expire_at')
if not cur[1] then return 'GONE' end
if cur[1] ~= ARGV[2] then return 'SUPERSEDED' end
if TERMINAL[cur[2]] then return 'TERMINAL' end
stat(ARGV[3] .. ':' .. cur[3], 1)
if cur[2] == 'input_required' then
  -- Only an input_required task has outstanding requests (request_input.lua sets both).
  stat('state:input_required', -1)
  stat('inputs', -redis.call('HLEN', KEYS[2]))
  redis.call('DEL', KEYS[2])
end
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[1], 'status', ARGV[3], ARGV[4], ARGV[5], 'updated_ms', now, 'lease', 0,
             'msg', ARGV[6])
else
  redis.call('HSET', KEYS[1], 'status', ARGV[3], ARGV[4], ARGV[5], 'updated_ms', now, 'lease', 0)
end
redis.call('PUBLISH', KEYS[1] .. ':ev', KEYS[1])  -- publish(), with `push` read above
if cur[4] then redis.call('PUBLISH', cur[4], KEYS[1]) end
redis.call('ZREM', KEYS[4], ARGV[1]); redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('ZREM', KEYS[6], ARGV[1])
if cur[5] and cur[5] ~= '' then redis.call('ZREM', KEYS[7], ARGV[1]) end
return 'OK'
