-- resource_refresh: a 2025-era session's GET stream keeps the session in the subscriber index
-- of each resource it subscribed to while it streams (an entry lasts a session TTL from its
-- subscribe or its last refresh; the session's own keys slide with every request, these do
-- not: sessions.touch_session knows no resource).
-- KEYS[1] session hash, KEYS[2..] the subscriber zsets of the session's subscriptions
-- ARGV[1] the session's sref, ARGV[2] the session TTL (ms)
-- returns 1; 0 when the session is gone (nothing written).
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local ttl = tonumber(ARGV[2])
for i = 2, #KEYS do
  redis.call('ZADD', KEYS[i], now + ttl, ARGV[1])
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return 1
