-- begin_step: a run about to call a step's fn proves, in the round trip that reads the memo,
-- that it still holds the task: the task exists, is not terminal, runs this generation, and
-- its lease is live from now on (a lapsed one, which no run has claimed since, is extended as
-- renew.lua would: another run claiming it meanwhile would have bumped the generation). A run
-- that was taken over (paused past its lease, cut off from Redis while the sweeper re-sent its
-- task) is answered SUPERSEDED here and never calls fn; without this read being fenced it called
-- fn, and only its save was refused, after the effect.
-- KEYS[1] task, KEYS[2] steps hash, KEYS[3] due zset (named `unclaimed`)
-- ARGV[1] ref, ARGV[2] gen, ARGV[3] step name, ARGV[4] lease ms
-- returns {'OK', '1', stored value} (memoized) | {'OK', '0'} (call fn)
--      | {'GONE'|'SUPERSEDED'|'TERMINAL'}
local bad, cur = fence(KEYS[1], ARGV[2], 'lease', 'parked', 'expire_at')
if bad then return {bad} end
-- A parked task's run ended when it parked (a resumed task runs a new generation).
if cur[4] == '1' then return {'SUPERSEDED'} end
local value = redis.call('HGET', KEYS[2], ARGV[3])
if value then return {'OK', '1', value} end
-- Counted as lost by a sweep (lease 0) or lapsed and not yet seen: this run is alive, so it
-- keeps the task; the run the sweeper sent meanwhile meets this lease and ends BUSY.
local lease = tonumber(cur[3]) or 0
local wanted = now + tonumber(ARGV[4])
if lease < wanted - tonumber(ARGV[4]) / 2 then
  redis.call('HSET', KEYS[1], 'lease', wanted)
  redis.call('ZADD', KEYS[3], due_at(wanted, cur[5]), ARGV[1])
end
return {'OK', '0'}
