-- sweep: find runs to enqueue again: expired leases (a dead worker) and tasks never claimed
-- within their bound (a web process died between persisting and enqueueing). Each found task is
-- re-armed on the unclaimed list, so it is found again if this enqueue is lost too.
-- An expired lease is a run that lost its worker (it neither finished, parked nor was released:
-- those zero the lease): judged (judge_loss in _prelude.lua) here or in claim.lua, whichever
-- sees it first (both zero or replace the lease, so it is judged once), and counted in the
-- task's `lost` field only if it is evidence against the tool. A task whose `lost`
-- reached ARGV[4] is not enqueued again: it is returned as poisoned, and the caller fails it
-- with finish.lua, fenced by the generation returned here (a run that claimed it since wins).
-- It stays re-armed until then, so a sweeper that dies in between leaves it to the next sweep.
-- Also drops tasks that reached their TTL unfinished from the active index: the due index holds
-- every unfinished task with a TTL until its expiry at the latest (see due_at in _prelude.lua).
-- KEYS[1] legacy leases zset (written by releases before the due index; drained here),
-- KEYS[2] due zset (named `unclaimed`: start-by deadlines, leases and expiries alike),
-- KEYS[3] active zset, KEYS[4] legacy expiry zset (written by releases before expiries went
-- into the due index; drained here);
-- ARGV[1] key prefix of task hashes, ARGV[2] unclaimed bound ms, ARGV[3] max batch,
-- ARGV[4] lost runs after which a task is poisoned (0 = never), ARGV[5] lease ms, ARGV[6] the
-- last moment (ms) the sweeping process found the store unreachable (0: never; see judge_loss)
-- returns {ref, tool, queue, gen, poisoned ('1' or '0'), ref, ...}
local out = {}
local max_lost = tonumber(ARGV[4])
local function due(zset)
  return redis.call('ZRANGEBYSCORE', zset, '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
end
for _, zset in ipairs({KEYS[1], KEYS[2]}) do
  for _, ref in ipairs(due(zset)) do
    local key = ARGV[1] .. ref
    local cur = redis.call('HMGET', key, 'status', 'tool', 'queue', 'lease', 'parked', 'gen', 'lost',
                           'expire_at', 'peers')
    redis.call('ZREM', zset, ref)
    local expiry = tonumber(cur[8])
    if not cur[1] or (expiry and expiry <= now and not TERMINAL[cur[1]]) then
      -- Its TTL is up (its keys are gone, or go within the skew between this clock and
      -- Redis's): an unfinished task that vanishes leaves the active index here.
      redis.call('ZREM', KEYS[3], ref)
    elseif TERMINAL[cur[1]] then
      -- Ended: a stale entry (finish and cancel remove theirs); nothing to do.
    elseif cur[5] == '1' then
      -- Parked: it waits for answers, not a worker (answer.lua re-arms it); it stays in the
      -- index for its expiry only.
      if expiry then redis.call('ZADD', KEYS[2], expiry, ref) end
    else
      local lease = tonumber(cur[4])
      if lease > now then
        -- A run holds it, but its deadline in the index was not its lease (moved by a writer
        -- of the release before the due index, mark_enqueued.lua's): back at the lease's
        -- deadline, never dropped, or a worker dying now would leave the task with no deadline.
        redis.call('ZADD', KEYS[2], due_at(lease, cur[8]), ref)
      else
        local lost = tonumber(cur[7]) or 0
        if lease > 0 then
          local loss = judge_loss(lease, cur[9], tonumber(ARGV[5]), tonumber(ARGV[6]))
          if loss == 'lost' then
            lost = lost + 1
            redis.call('HSET', key, 'lost', lost, 'lease', 0, 'lost_gen', cur[6])
          elseif loss == 'shared' then
            redis.call('HSET', key, 'solo', shared_loss(key), 'lease', 0)
          else
            redis.call('HSET', key, 'lease', 0)
          end
        end
        redis.call('ZADD', KEYS[2], due_at(now + tonumber(ARGV[2]), cur[8]), ref)
        local poisoned = '0'
        if max_lost > 0 and lost >= max_lost then poisoned = '1' end
        out[#out + 1] = ref; out[#out + 1] = cur[2]; out[#out + 1] = cur[3]
        out[#out + 1] = cur[6]; out[#out + 1] = poisoned
      end
    end
  end
end
for _, ref in ipairs(due(KEYS[4])) do
  redis.call('ZREM', KEYS[4], ref); redis.call('ZREM', KEYS[3], ref)
end
return out
