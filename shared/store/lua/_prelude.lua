-- Prepended to every script by shared/store/scripts.py (and _clock.lua before it, to a script
-- that uses `now`).
local TERMINAL = {completed = true, failed = true, cancelled = true}

-- Every key of a task expires with the task hash (ttlMs counted from createdAt).
local function expire_with_task(task_key, key)
  local at = redis.call('HGET', task_key, 'expire_at')
  if at and at ~= '' then redis.call('PEXPIREAT', key, at) end
end

-- The fence of every worker write: the task exists, runs generation `gen`, is not terminal.
-- Returns the reason it refuses, or nil and the task's gen, status and any further fields the
-- caller names (read in the same HMGET: one command for the fence and what the write needs).
local function fence(task_key, gen, ...)
  local cur = redis.call('HMGET', task_key, 'gen', 'status', ...)
  if not cur[1] then return 'GONE' end
  if cur[1] ~= gen then return 'SUPERSEDED' end
  if TERMINAL[cur[2]] then return 'TERMINAL' end
  return nil, cur
end

-- Push: every change a client can see is published on the task's channel (`<task key>:ev`)
-- while a client watches the task (its `watch` field is '1'; a synchronous call's task, field
-- `sync`, always has one: its caller), and on its listing scope's channel when it has one (field
-- `push`), inside the script that makes it. A watcher subscribes first, then marks the task
-- watched and reads it in one script (read.lua), so it misses nothing: a change is either in
-- what it read or in a message after it. A task nobody watches (most: clients poll tasks/get)
-- costs no PUBLISH. The message is the task key. (A channel is not a key: a script may publish
-- on one it was not given.)
-- `watched`, `sync`: the task's `watch` and `sync` fields as the caller read them.
-- `scope`: the task's `push` field when the caller read it already (false: it has none).
local function publish(task_key, watched, sync, scope)
  if watched == '1' or sync == '1' then redis.call('PUBLISH', task_key .. ':ev', task_key) end
  if scope == nil then scope = redis.call('HGET', task_key, 'push') end
  if scope then redis.call('PUBLISH', scope, task_key) end
end

-- The due index (`unclaimed`) holds a task at the earlier of its deadline (a start-by or a
-- lease: when the sweeper must look at its run) and its expiry (`expire_at`, '' or false for
-- none: when the sweeper drops it from the active index, its keys having expired). One index
-- for both: no second index written on every create and cleaned on every end.
-- `deadline`: ms, or nil for none (a parked task waits for answers, not for a worker).
local function due_at(deadline, expire_at)
  local at = tonumber(expire_at)
  if at and (deadline == nil or at < deadline) then return at end
  return deadline
end

-- Operational counters (the `stats` hash, see shared/store/keyspace.py): always the last key.
local function stat(field, n)
  if n ~= 0 then redis.call('HINCRBY', KEYS[#KEYS], field, n) end
end

-- A run's lease lapsed without a finish, park or release: is that evidence against its tool
-- (MCPQ_MAX_RUNS)? Only when nothing else explains it. `lease`: the lapsed deadline; `peers`:
-- how many other runs the run's process held at its last claim or renewal; `lease_ms`: the
-- deployment's lease; `excuse`: the last moment (ms) the counting process found the store
-- unreachable.
-- 'excused': the store was unreachable after the run's last renewal (a Redis restart, a
--   failover, a partition): the run could not renew; it is no evidence of anything.
-- 'shared': the run's whole process went (killed from outside, a host lost, or one of its other
--   runs' tools took it down): not counted, but counted in `shared`; at the second (a task
--   present at two process deaths: one is what any long task on a host that dies sees) it is
--   marked `solo` (see shared_loss), so its next run is alone in a process of its own, where a
--   loss does say something about its tool.
-- 'lost': it ran alone and its process died: counted.
-- A shared loss of task `key`: counted, and `solo` from the second on; returns the solo flag.
local function shared_loss(key)
  if redis.call('HINCRBY', key, 'shared', 1) >= 2 then return '1' end
  return redis.call('HGET', key, 'solo') or '0'
end

local function judge_loss(lease, peers, lease_ms, excuse)
  if excuse > 0 and excuse >= lease - lease_ms then return 'excused' end
  if (tonumber(peers) or 0) > 0 then return 'shared' end
  return 'lost'
end
