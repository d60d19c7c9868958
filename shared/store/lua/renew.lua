-- renew: the running worker extends its lease (heartbeat) and learns the current status.
-- KEYS[1] task, KEYS[2] due zset (named `unclaimed`); ARGV[1] ref, ARGV[2] gen, ARGV[3] lease ms,
-- ARGV[4] how many other runs the process holds (judge_loss in _prelude.lua reads it)
-- returns {'OK', status} (renewed) | {'TERMINAL', status} | {'GONE'} | {'SUPERSEDED'}
--      | {'PARKED'} (the run let go of the task: no renewal)
local cur = redis.call('HMGET', KEYS[1], 'gen', 'status', 'parked', 'expire_at', 'lost_gen')
if not cur[1] then return {'GONE'} end
-- A run whose lapse was counted as lost (sweep.lua, claim.lua: `lost_gen`) renews: its process
-- was alive all along (paused past its lease, say), so the loss was no evidence against its
-- tool: withdrawn, whether or not another run has taken the task over since.
if cur[5] == ARGV[2] then
  local lost = tonumber(redis.call('HGET', KEYS[1], 'lost')) or 0
  redis.call('HSET', KEYS[1], 'lost', math.max(lost - 1, 0))
  redis.call('HDEL', KEYS[1], 'lost_gen')
end
-- Fencing: only the run of the current generation may keep the task; a stale run that still
-- beats must not extend a lease that now belongs to its successor.
if cur[1] ~= ARGV[2] then return {'SUPERSEDED'} end
if TERMINAL[cur[2]] then return {'TERMINAL', cur[2]} end
if cur[3] == '1' then return {'PARKED'} end
local lease = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'lease', lease, 'peers', ARGV[4])
redis.call('ZADD', KEYS[2], due_at(lease, cur[4]), ARGV[1])
return {'OK', cur[2]}
