-- sweep: find runs to enqueue again: expired leases (a dead worker) and tasks never claimed
-- within their bound (a web process died between persisting and enqueueing). Each found task is
-- re-armed on the unclaimed list, so it is found again if this enqueue is lost too.
-- Also drops tasks that reached their TTL unfinished from the active and expiry indexes.
-- KEYS[1] leases zset, KEYS[2] unclaimed zset, KEYS[3] active zset, KEYS[4] expiry zset; ARGV[1] key prefix of task hashes,
-- ARGV[2] unclaimed bound ms, ARGV[3] max batch
-- returns {ref, tool, queue, ref, tool, queue, ...}
local out = {}
local function due(zset)
  return redis.call('ZRANGEBYSCORE', zset, '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
end
for _, zset in ipairs({KEYS[1], KEYS[2]}) do
  for _, ref in ipairs(due(zset)) do
    local cur = redis.call('HMGET', ARGV[1] .. ref, 'status', 'tool', 'queue', 'lease', 'parked')
    redis.call('ZREM', zset, ref)
    -- Only tasks that still need a run: not ended, no live lease (the index may be stale),
    -- not parked (those wait for answers; answer.lua re-arms them).
    if cur[1] and not TERMINAL[cur[1]] and tonumber(cur[4]) <= now and cur[5] ~= '1' then
      redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ref)
      out[#out + 1] = ref; out[#out + 1] = cur[2]; out[#out + 1] = cur[3]
    end
  end
end
for _, ref in ipairs(due(KEYS[4])) do
  redis.call('ZREM', KEYS[4], ref); redis.call('ZREM', KEYS[3], ref)
end
return out
