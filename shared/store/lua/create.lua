-- create: a new task in state `working`, unless the id exists (SET NX semantics).
-- KEYS[1] task hash, KEYS[2] unclaimed zset, KEYS[3] active zset, KEYS[4] expiry zset,
-- KEYS[5] stats hash
-- ARGV[1] ref, ARGV[2] ttl_ms ('' = unlimited), ARGV[3] unclaimed bound ms, ARGV[4..] field/value
-- returns {1, created_ms} or {0} when the task exists already
if redis.call('EXISTS', KEYS[1]) == 1 then return {0} end
local fields = {'status', 'working', 'created_ms', now, 'updated_ms', now, 'gen', 0,
                'lease', 0, 'parked', 0, 'runs', 0}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
if ARGV[2] ~= '' then
  local at = now + tonumber(ARGV[2])
  redis.call('HSET', KEYS[1], 'expire_at', at)
  redis.call('PEXPIREAT', KEYS[1], at)
  redis.call('ZADD', KEYS[4], at, ARGV[1])
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
stat('created:' .. redis.call('HGET', KEYS[1], 'tool'), 1)
stat('state:working', 1)
redis.call('ZADD', KEYS[3], now, ARGV[1])
return {1, now}
