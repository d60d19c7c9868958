-- read: a task and its outstanding input requests (tasks/get), for its owner only.
-- KEYS[1] task hash, KEYS[2] inputs hash
-- ARGV[1] owner
-- returns {} when the task is unknown, expired or another principal's: alike, and after the
--         same work (one HGET), so neither the reply nor its timing tells them apart (nothing
--         of another principal's task leaves Redis); else {task field/values, input field/values}
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return {} end
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
