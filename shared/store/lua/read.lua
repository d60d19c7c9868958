-- read: a task and its outstanding input requests (tasks/get), for its owner only.
-- KEYS[1] task hash, KEYS[2] inputs hash
-- ARGV[1] owner
-- returns {} when the task is unknown, expired or another principal's: alike, and after the
--         same work (one HGET), so neither the reply nor its timing tells them apart (nothing
--         of another principal's task leaves Redis); else {task field/values, input field/values}
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return {} end
local task = redis.call('HGETALL', KEYS[1])
-- Outstanding requests exist only while the task is input_required (request_input.lua).
for i = 1, #task, 2 do
  if task[i] == 'status' then
    if task[i + 1] == 'input_required' then return {task, redis.call('HGETALL', KEYS[2])} end
    break
  end
end
return {task, {}}
