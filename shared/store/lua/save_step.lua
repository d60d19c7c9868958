-- save_step: memoize the JSON result of ctx.step(name, fn); the first stored value wins.
-- KEYS[1] task, KEYS[2] steps hash; ARGV[1] gen, ARGV[2] name, ARGV[3] value
-- returns {'OK', stored value} | {'GONE'|'SUPERSEDED'|'TERMINAL'}
local cur = redis.call('HMGET', KEYS[1], 'gen', 'status')
if not cur[1] then return {'GONE'} end
if cur[1] ~= ARGV[1] then
  -- An earlier generation's fn did run (it was taken over while inside fn, past begin_step's
  -- check): its value is a fact about the world, not a claim on the task, so it is kept (the
  -- first value wins) and the run that took over finds it instead of calling fn again. The run
  -- itself is still refused: it stops here.
  if tonumber(ARGV[1]) < tonumber(cur[1]) and not TERMINAL[cur[2]] then
    redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[3])
    expire_with_task(KEYS[1], KEYS[2])
  end
  return {'SUPERSEDED'}
end
if TERMINAL[cur[2]] then return {'TERMINAL'} end
redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[3])
expire_with_task(KEYS[1], KEYS[2])
return {'OK', redis.call('HGET', KEYS[2], ARGV[2])}
