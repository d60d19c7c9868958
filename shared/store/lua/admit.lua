-- admit: a sharded store's admission of a create, on the principal's home shard (the task's own
-- keys are on another: create.lua then writes the task with its limits off). The same checks as
-- create.lua makes in a store of one shard, in the same order and all before any write: the
-- single use of a task-creating requestState, the principal's open tasks (or sync calls), its
-- token bucket. A refused request spends nothing; two racing requests cannot both take the last
-- slot (this script is atomic on the home shard, which holds every key it needs).
-- KEYS[1] the principal's quota zset (unfinished tasks, or sync calls), KEYS[2] its token bucket,
-- KEYS[3] the used-state marker
-- ARGV[1] ref, ARGV[2] quota limit (0 = none), ARGV[3] tokens per second (0 = no rate limit),
-- ARGV[4] burst, ARGV[5] used-state TTL ms (0 = no single-use state), ARGV[6] '1' when a full
-- quota set may be answered with its members (the caller finds the ended ones and asks again),
-- ARGV[7..] members to drop first: their task ended (the caller read it on their shards)
-- returns {'OK'} | {'REPLAYED'} | {'QUOTA', retry_ms} | {'RATE', retry_ms} |
--         {'FULL', now, ref, admitted ms, ...}
local once_ms = tonumber(ARGV[5])
if once_ms > 0 and redis.call('EXISTS', KEYS[3]) == 1 then return {'REPLAYED'} end
local limit = tonumber(ARGV[2])
if limit > 0 then
  -- Lazy, as in create.lua, but the tasks live on other shards: the caller says which ended.
  if #ARGV >= 7 then redis.call('ZREM', KEYS[1], unpack(ARGV, 7)) end
  if redis.call('ZCARD', KEYS[1]) >= limit then
    if ARGV[6] ~= '1' then return {'QUOTA', 1000} end
    local out = {'FULL', now}
    -- Bounded: the set never grows past the limit.
    for _, v in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')) do
      out[#out + 1] = v
    end
    return out
  end
end
local rate = tonumber(ARGV[3])
if rate > 0 then
  local burst = tonumber(ARGV[4])
  local b = redis.call('HMGET', KEYS[2], 'tokens', 'at')
  local tokens = burst
  if b[1] then tokens = math.min(burst, tonumber(b[1]) + (now - tonumber(b[2])) * rate / 1000) end
  if tokens < 1 then return {'RATE', math.ceil((1 - tokens) * 1000 / rate)} end
  redis.call('HSET', KEYS[2], 'tokens', tostring(tokens - 1), 'at', now)
  redis.call('PEXPIRE', KEYS[2], math.ceil(burst * 1000 / rate) + 1000)
end
if once_ms > 0 then redis.call('SET', KEYS[3], '1', 'PX', once_ms) end
if limit > 0 then
  -- Counted now, created next (on the task's shard): a member whose task does not exist yet is
  -- left alone for a grace period by the pruning above (calls.ADMIT_GRACE_MS).
  redis.call('ZADD', KEYS[1], now, ARGV[1])
  redis.call('PEXPIRE', KEYS[1], 7 * 86400000)
end
return {'OK'}
