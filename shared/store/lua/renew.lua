-- renew: running workers extend their leases (heartbeat) and learn each task's status; many
-- runs of one shard at once (the lease keeper's round), or one.
-- KEYS[1] due zset (named `unclaimed`), KEYS[2..] each run's task; ARGV[1] lease ms,
-- ARGV[2] how many other runs the process holds (judge_loss in _prelude.lua reads it), then
-- each run's ref and gen (ARGV[2i+1], ARGV[2i+2] for KEYS[i+1])
-- returns, for each run in order: {'OK', status} (renewed) | {'TERMINAL', status} | {'GONE'}
--      | {'SUPERSEDED'} | {'PARKED'} (the run let go of the task: no renewal)
-- NOTE: one call per shard and round, not one per run: 10,000 runs cost one script and one
-- reply each per chunk (the caller sends at most RENEW_CHUNK runs a call, so that no call
-- holds Redis for long), instead of 10,000 of each.
local lease = now + tonumber(ARGV[1])
local function renew_one(task, ref, gen)
  local cur = redis.call('HMGET', task, 'gen', 'status', 'parked', 'expire_at', 'lost_gen')
  if not cur[1] then return {'GONE'} end
  -- A run whose lapse was counted as lost (sweep.lua, claim.lua: `lost_gen`) renews: its
  -- process was alive all along (paused past its lease, say), so the loss was no evidence
  -- against its tool: withdrawn, whether or not another run has taken the task over since.
  if cur[5] == gen then
    local lost = tonumber(redis.call('HGET', task, 'lost')) or 0
    redis.call('HSET', task, 'lost', math.max(lost - 1, 0))
    redis.call('HDEL', task, 'lost_gen')
  end
  -- Fencing: only the run of the current generation may keep the task; a stale run that still
  -- beats must not extend a lease that now belongs to its successor.
  if cur[1] ~= gen then return {'SUPERSEDED'} end
  if TERMINAL[cur[2]] then return {'TERMINAL', cur[2]} end
  if cur[3] == '1' then return {'PARKED'} end
  redis.call('HSET', task, 'lease', lease, 'peers', ARGV[2])
  redis.call('ZADD', KEYS[1], due_at(lease, cur[4]), ref)
  return {'OK', cur[2]}
end
local replies = {}
for i = 2, #KEYS do
  replies[i - 1] = renew_one(KEYS[i], ARGV[2 * i - 1], ARGV[2 * i])
end
return replies
