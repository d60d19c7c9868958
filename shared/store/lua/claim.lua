-- claim: a worker takes the task for one run: new fencing generation and a lease.
-- KEYS[1] task, KEYS[2] answers hash, KEYS[3] legacy leases zset (only cleaned: see keyspace.py),
-- KEYS[4] due zset (named `unclaimed`: the deadline at which a sweep looks at the task)
-- ARGV[1] ref, ARGV[2] lease ms, ARGV[3] lost runs after which the task is not run again
-- (0 = no limit), ARGV[4] how many other runs the claiming process holds, ARGV[5] the last
-- moment (ms) the claiming process found the store unreachable (0: never; see judge_loss),
-- ARGV[6] '1' when the run will be alone in its process (a prefork child, a run of its own)
-- returns {'OK', gen, {task field/value...}, {answer key/value...}}
--      or {'GONE'|'TERMINAL'|'BUSY'|'PARKED'|'POISONED'|'SOLO'}
-- SOLO: the task must run alone in its process (it lost a process shared with other runs) and
-- this one holds others: nothing is written; the caller runs it in a process of its own.
-- One read of the whole hash: the checks below need seven of its fields and the reply all of
-- them (a second command per run otherwise).
local task = redis.call('HGETALL', KEYS[1])
local h = {}
for i = 1, #task, 2 do h[task[i]] = task[i + 1] end
local cur = {h.status, h.lease, h.parked, h.gen, h.runs, h.answered, h.lost}
local peers = tonumber(ARGV[4]) or 0
if not cur[1] then
  redis.call('ZREM', KEYS[3], ARGV[1]); redis.call('ZREM', KEYS[4], ARGV[1])
  return {'GONE'}
end
if TERMINAL[cur[1]] then
  redis.call('ZREM', KEYS[3], ARGV[1]); redis.call('ZREM', KEYS[4], ARGV[1])
  return {'TERMINAL'}
end
-- A live lease means another run is at work (a duplicate delivery, or a re-send that raced
-- the first start): this one must not start. A parked task waits for answers, not a worker.
if tonumber(cur[2]) > now then return {'BUSY'} end
if cur[3] == '1' then return {'PARKED'} end
local alone = ARGV[6] == '1'
if h.solo == '1' and not alone then return {'SOLO'} end
-- An expired lease still set: the previous run lost its worker (finish, park and release zero
-- it) and the sweeper has not judged it yet (sweep.lua zeroes it when it does): judged here,
-- once (judge_loss). A task whose runs lost their worker often enough is not run again: it goes
-- back on the unclaimed list, due now, and the sweeper fails it (sweep.lua returns it poisoned).
local lost = tonumber(cur[7]) or 0
local solo = h.solo or '0'
if tonumber(cur[2]) > 0 then
  local loss = judge_loss(tonumber(cur[2]), h.peers, tonumber(ARGV[2]), tonumber(ARGV[5]))
  if loss == 'lost' then
    lost = lost + 1
    redis.call('HSET', KEYS[1], 'lost_gen', cur[4])  -- see renew.lua: withdrawn if it renews
  elseif loss == 'shared' then
    solo = shared_loss(KEYS[1])
  end
  if solo == '1' and not alone then
    redis.call('HSET', KEYS[1], 'lease', 0, 'solo', solo, 'lost', lost)
    return {'SOLO'}
  end
end
local max_lost = tonumber(ARGV[3])
if max_lost > 0 and lost >= max_lost then
  redis.call('HSET', KEYS[1], 'lost', lost, 'lease', 0)
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZADD', KEYS[4], due_at(now, h.expire_at), ARGV[1])
  return {'POISONED'}
end
-- The new generation fences every earlier run: their writes now answer SUPERSEDED. (Written
-- with the lease in one HSET: this script is atomic, so read-then-write cannot race.)
local gen = tonumber(cur[4]) + 1
local lease = now + tonumber(ARGV[2])
local runs = tonumber(cur[5]) + 1
redis.call('HSET', KEYS[1], 'gen', gen, 'lease', lease, 'sends', 0, 'runs', runs, 'lost', lost,
           'peers', peers, 'solo', solo)
-- One index of deadlines: the lease replaces the "must be started by" deadline (one command
-- instead of moving the task from one index to another), or its expiry if that comes first.
redis.call('ZADD', KEYS[4], due_at(lease, h.expire_at), ARGV[1])
-- Answers delivered so far (a resumed run replays them); only a task that ever got one has any.
local answers = {}
if cur[6] == '1' then answers = redis.call('HGETALL', KEYS[2]) end
-- The hash as it is now: what was read, with this claim's writes.
local now_fields = {gen = tostring(gen), lease = tostring(lease), sends = '0', runs = tostring(runs),
                    lost = tostring(lost), peers = tostring(peers), solo = solo}
for i = 1, #task, 2 do
  local changed = now_fields[task[i]]
  if changed then task[i + 1] = changed; now_fields[task[i]] = nil end
end
for name, value in pairs(now_fields) do task[#task + 1] = name; task[#task + 1] = value end
return {'OK', tostring(gen), task, answers}
