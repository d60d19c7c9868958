-- save_step: memoize the JSON result of ctx.step(name, fn); the first stored value wins.
-- KEYS[1] task, KEYS[2] steps hash; ARGV[1] gen, ARGV[2] name, ARGV[3] value
-- returns {'OK', stored value} | {'GONE'|'SUPERSEDED'|'TERMINAL'}
local bad = fence(KEYS[1], ARGV[1])
if bad then return {bad} end
redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[3])
expire_with_task(KEYS[1], KEYS[2])
return {'OK', redis.call('HGET', KEYS[2], ARGV[2])}
