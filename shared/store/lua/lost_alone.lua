-- lost_alone: a run of its own (workers/solo.py) died while the process that started it lived
-- on: its tool took its own process down (or something killed that process alone), which is the
-- evidence judge_loss counts. Its renewals said it had peers (a process group may be stopped as
-- a whole, and then a loss says nothing about the tool); this says it had none, so its lapsed
-- lease counts as lost when the sweeper (or a claim) judges it.
-- KEYS[1] task; returns 1 if marked, 0 if the task ended, is gone, or no run holds it
local cur = redis.call('HMGET', KEYS[1], 'status', 'lease')
if not cur[1] or TERMINAL[cur[1]] or (tonumber(cur[2]) or 0) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'peers', 0)
return 1
