-- resource_subscribe: a 2025-era session subscribes to a resource (resources/subscribe).
-- KEYS[1] session hash, KEYS[2] the session's subscriptions hash, KEYS[3] the resource's
-- subscribers (zset: sref -> until when, ms)
-- ARGV[1] the URI's digest, ARGV[2] the URI (sealed), ARGV[3] the session's sref,
-- ARGV[4] the session TTL (ms), ARGV[5] the most subscriptions a session may hold
-- returns 1; 0 when the session is gone (a write after its end would leave keys nothing
-- ends); -1 when it holds ARGV[5] other subscriptions already.
-- NOTE: the subscription and the subscriber entry are written in one step, before the answer:
-- an update announced once the client has its answer finds the session (resource_updated.lua).
local left = redis.call('PTTL', KEYS[1])
if left == -2 then return 0 end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0
    and redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[5]) then
  return -1
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
-- Expires with the session (every request of the session slides both: sessions.touch_session).
if left > 0 then redis.call('PEXPIRE', KEYS[2], left) end
local ttl = tonumber(ARGV[4])
redis.call('ZADD', KEYS[3], now + ttl, ARGV[3])
-- The index lives as long as its longest-lived entry, never shorter.
if redis.call('PTTL', KEYS[3]) < ttl then redis.call('PEXPIRE', KEYS[3], ttl) end
return 1
