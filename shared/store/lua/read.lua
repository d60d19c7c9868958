-- read: a task and its outstanding input requests (tasks/get), for its owner only.
-- KEYS[1] task hash, KEYS[2] inputs hash
-- ARGV[1] owner, ARGV[2] '1' when the reader watches the task (subscribed to its changes first:
-- it is marked watched here, in the same step as the read, so the changes it did not read are
-- all pushed; see publish in _prelude.lua), ARGV[3] '1' when the reader wants the whole task,
-- the call itself included (its arguments, capabilities and pre-answers), else '' and
-- ARGV[4..] the fields a poll reads (POLL_FIELDS in shared/store/records.py, 'owner' first)
-- returns {} when the task is unknown, expired or another principal's: alike, and after the
--         same work (one HGET, or a poll's one HMGET), so neither the reply nor its timing tells
--         them apart (nothing of another principal's task leaves Redis); else {task
--         field/values, input field/values}
local task, status, watched = {}, nil, false
if ARGV[3] == '1' then
  if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return {} end
  task = redis.call('HGETALL', KEYS[1])
  for i = 1, #task, 2 do
    if task[i] == 'status' then
      status = task[i + 1]
    elseif (task[i] == 'watch' or task[i] == 'sync') and task[i + 1] == '1' then
      watched = true  -- (a synchronous call's task is always pushed: publish in _prelude.lua)
    end
  end
else
  -- A poll (tasks/get, a stream's step) needs the task's state, not the call that made it: the
  -- call's fields are the hash's largest (arguments up to MCPQ_MAX_ARGUMENTS_BYTES), and every
  -- one that leaves Redis is decrypted by the reader. One HMGET reads the owner, the poll's
  -- fields and `watch`; nothing is copied into Lua that the reader does not get.
  local values = redis.call('HMGET', KEYS[1], 'watch', unpack(ARGV, 4))
  if values[2] ~= ARGV[1] then return {} end  -- ARGV[4] is 'owner'
  watched = values[1] == '1'
  for i = 4, #ARGV do
    local value = values[i - 2]
    if value then
      task[#task + 1] = ARGV[i]
      task[#task + 1] = value
      if ARGV[i] == 'status' then
        status = value
      elseif ARGV[i] == 'sync' and value == '1' then
        watched = true
      end
    end
  end
end
-- (An ended task changes no more: nothing to mark.)
if ARGV[2] == '1' and not watched and not TERMINAL[status] then
  redis.call('HSET', KEYS[1], 'watch', 1)
end
-- Outstanding requests exist only while the task is input_required (request_input.lua).
if status == 'input_required' then return {task, redis.call('HGETALL', KEYS[2])} end
return {task, {}}
