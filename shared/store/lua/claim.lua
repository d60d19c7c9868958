-- claim: a worker takes the task for one run: new fencing generation and a lease.
-- KEYS[1] task, KEYS[2] answers hash, KEYS[3] leases zset, KEYS[4] unclaimed zset
-- ARGV[1] ref, ARGV[2] lease ms
-- returns {'OK', gen, {task field/value...}, {answer key/value...}}
--      or {'GONE'|'TERMINAL'|'BUSY'|'PARKED'}
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[3], ARGV[1]); redis.call('ZREM', KEYS[4], ARGV[1])
  return {'GONE'}
end
local cur = redis.call('HMGET', KEYS[1], 'status', 'lease', 'parked')
if TERMINAL[cur[1]] then
  redis.call('ZREM', KEYS[3], ARGV[1]); redis.call('ZREM', KEYS[4], ARGV[1])
  return {'TERMINAL'}
end
-- A live lease means another run is at work (a duplicate delivery, or a re-send that raced
-- the first start): this one must not start. A parked task waits for answers, not a worker.
if tonumber(cur[2]) > now then return {'BUSY'} end
if cur[3] == '1' then return {'PARKED'} end
-- The new generation fences every earlier run: their writes now answer SUPERSEDED.
local gen = redis.call('HINCRBY', KEYS[1], 'gen', 1)
local lease = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'lease', lease, 'sends', 0)
redis.call('HINCRBY', KEYS[1], 'runs', 1)
redis.call('ZADD', KEYS[3], lease, ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
return {'OK', tostring(gen), redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
