-- finish: the run ends the task (completed with result, or failed with error). Fenced, so a
-- late or duplicate worker can never overwrite `cancelled` or a newer run.
-- KEYS[1] task, KEYS[2] inputs, KEYS[3] wake channel (unused), KEYS[4] due zset (named
-- `unclaimed`), KEYS[5] active zset, KEYS[6] stats
-- ARGV[1] ref, ARGV[2] gen, ARGV[3] status, ARGV[4] field, ARGV[5] payload,
-- ARGV[6] statusMessage ('' clears it: a progress text does not outlive the run it described),
-- ARGV[7] a counter to bump besides the outcome's ('poisoned' from the sweeper, else ''),
-- ARGV[8] '1': count the outcome in the stats hash here ('': the caller counts it, see
-- shared/store/tally.py)
-- returns 'OK' ({'OK', tool} when the caller counts: it needs the tool's name) | 'GONE' |
--         'SUPERSEDED' | 'TERMINAL'
local bad, cur = fence(KEYS[1], ARGV[2], 'tool', 'watch', 'sync', 'push')
if bad then return bad end
if ARGV[8] == '1' then stat(ARGV[3] .. ':' .. cur[3], 1) end
if ARGV[7] ~= '' then stat(ARGV[7] .. ':' .. cur[3], 1) end
if cur[2] == 'input_required' then
  -- Only an input_required task has outstanding requests (request_input.lua sets both).
  stat('state:input_required', -1)
  stat('inputs', -redis.call('HLEN', KEYS[2]))
  redis.call('DEL', KEYS[2])
end
redis.call('HSET', KEYS[1], 'status', ARGV[3], ARGV[4], ARGV[5], 'updated_ms', now, 'lease', 0,
           'msg', ARGV[6])
publish(KEYS[1], cur[4], cur[5], cur[6])
redis.call('ZREM', KEYS[4], ARGV[1]); redis.call('ZREM', KEYS[5], ARGV[1])
if ARGV[8] ~= '1' then return {'OK', cur[3]} end
return 'OK'
