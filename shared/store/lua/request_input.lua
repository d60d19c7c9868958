-- request_input: the tool needs answers for some keys. Answered keys return their answer (a
-- replayed run is never asked twice); the others become outstanding and the task input_required.
-- Calling it again for the same keys is the poll for answers.
-- KEYS[1] task, KEYS[2] inputs hash, KEYS[3] answers hash, KEYS[4] stats hash
-- ARGV[1] gen, ARGV[2..] key/request pairs
-- returns {'OK', missing count, key, answer, ...} or {'GONE'|'SUPERSEDED'|'TERMINAL'}
local bad, cur = fence(KEYS[1], ARGV[1], 'watch', 'sync', 'push')
if bad then return {bad} end
local out = {'OK', 0}
local missing, added = 0, 0
for i = 2, #ARGV, 2 do
  local answer = redis.call('HGET', KEYS[3], ARGV[i])
  if answer then
    out[#out + 1] = ARGV[i]; out[#out + 1] = answer
  else
    missing = missing + 1
    added = added + redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end
out[2] = missing
if added > 0 then
  expire_with_task(KEYS[1], KEYS[2])
  stat('inputs', added)
  local fields = {'status', 'input_required', 'updated_ms', now}
  if cur[2] ~= 'input_required' then
    stat('state:input_required', 1)
    -- A new state: the progress text of the working one is not shown with the questions.
    fields[#fields + 1] = 'msg'; fields[#fields + 1] = ''
  end
  redis.call('HSET', KEYS[1], unpack(fields))
  publish(KEYS[1], cur[3], cur[4], cur[5])
end
return out
