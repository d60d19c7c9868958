-- create: a new task in state `working`, unless the id exists (SET NX semantics), admitted by
-- the principal's quotas and, for a task-creating requestState, its single use; and, when the
-- broker is this Redis, its run's message pushed onto the broker's queue in the same step.
-- KEYS[1] task hash, KEYS[2] due zset (named `unclaimed`), KEYS[3] active zset,
-- KEYS[4] the principal's quota zset (unfinished tasks, or sync calls), KEYS[5] its token
-- bucket, KEYS[6] the used-state marker, KEYS[7] the broker's queue list, KEYS[8] stats hash
-- ARGV[1] ref, ARGV[2] ttl_ms ('' = unlimited), ARGV[3] unclaimed bound ms,
-- ARGV[4] quota limit (0 = none), ARGV[5] tokens per second (0 = no rate limit), ARGV[6] burst,
-- ARGV[7] used-state TTL ms (0 = no single-use state), ARGV[8] the run's broker message
-- ('' = the caller publishes it), ARGV[9] ms to start it once sent, ARGV[10] tool,
-- ARGV[11] '1': count it in the stats hash here ('': the caller counts it, see
-- shared/store/tally.py), ARGV[12..] field/value
-- returns {1, created_ms} | {0} when the task exists already | {'REPLAYED'} |
--         {'QUOTA', retry_ms} | {'RATE', retry_ms}
if redis.call('EXISTS', KEYS[1]) == 1 then return {0} end
-- Every check runs before any write, in one script: a refused request spends nothing (no
-- token, no use of its state), and two racing requests cannot both take the last slot.
-- The single use first: a replayed state must not spend the principal's quota either.
local once_ms = tonumber(ARGV[7])
if once_ms > 0 and redis.call('EXISTS', KEYS[6]) == 1 then return {'REPLAYED'} end
local limit = tonumber(ARGV[4])
if limit > 0 and redis.call('ZCARD', KEYS[4]) >= limit then
  -- Lazy: members whose task ended (or expired) are no longer in the active index; they leave
  -- now, so no terminal transition has to know about quotas. The set never grows past the
  -- limit, so this walk is bounded by it.
  for _, ref in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
    if not redis.call('ZSCORE', KEYS[3], ref) then redis.call('ZREM', KEYS[4], ref) end
  end
  if redis.call('ZCARD', KEYS[4]) >= limit then return {'QUOTA', 1000} end
end
local rate = tonumber(ARGV[5])
local tokens = 0
if rate > 0 then
  -- A token bucket on Redis's clock (every replica shares it): `burst` at most, refilled at
  -- `rate` per second, one token per task.
  local burst = tonumber(ARGV[6])
  local b = redis.call('HMGET', KEYS[5], 'tokens', 'at')
  tokens = burst
  if b[1] then tokens = math.min(burst, tonumber(b[1]) + (now - tonumber(b[2])) * rate / 1000) end
  if tokens < 1 then return {'RATE', math.ceil((1 - tokens) * 1000 / rate)} end
  redis.call('HSET', KEYS[5], 'tokens', tostring(tokens - 1), 'at', now)
  redis.call('PEXPIRE', KEYS[5], math.ceil(burst * 1000 / rate) + 1000)
end
if once_ms > 0 then redis.call('SET', KEYS[6], '1', 'PX', once_ms) end
-- The run must be enqueued within the unclaimed bound (the sweeper does it otherwise); once its
-- message is out, started within ARGV[9] (see mark_enqueued.lua: this is its first send).
local start_by, sends = now + tonumber(ARGV[3]), 0
if ARGV[8] ~= '' then
  -- Atomic with the create: no window in which the task exists and its run was never sent,
  -- and no second round trip. The message is exactly what kombu's Redis transport would push
  -- (built by Celery itself on the web tier); a worker may pop it before this reply is read,
  -- which is fine: the task is written before the script returns, and scripts are atomic.
  redis.call('LPUSH', KEYS[7], ARGV[8])
  start_by, sends = now + tonumber(ARGV[9]), 1
end
local fields = {'status', 'working', 'created_ms', now, 'updated_ms', now, 'gen', 0,
                'lease', 0, 'parked', 0, 'runs', 0, 'sends', sends, 'tool', ARGV[10]}
local expire_at = false
if ARGV[2] ~= '' then
  expire_at = now + tonumber(ARGV[2])
  fields[#fields + 1] = 'expire_at'; fields[#fields + 1] = expire_at
end
for i = 12, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
if expire_at then redis.call('PEXPIREAT', KEYS[1], expire_at) end
if limit > 0 then
  redis.call('ZADD', KEYS[4], now, ARGV[1])
  -- Idle principals' sets go away; one whose only task runs longer than this without a new
  -- create is undercounted by it (lenient, never wrongly refused).
  redis.call('PEXPIRE', KEYS[4], 7 * 86400000)
end
redis.call('ZADD', KEYS[2], due_at(start_by, expire_at), ARGV[1])
-- (No `state:working` gauge: working = unfinished (the active index) - input_required.)
if ARGV[11] == '1' then stat('created:' .. ARGV[10], 1) end
redis.call('ZADD', KEYS[3], now, ARGV[1])
return {1, now}
