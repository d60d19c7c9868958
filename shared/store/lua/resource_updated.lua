-- resource_updated: a resource changed (app.resource_updated, from any process). Tells the
-- subscriptions/listen streams that named it (its channel) and the GET stream of each 2025-era
-- session subscribed to it (the session's channel). The message names the URI's digest, never
-- the URI: each stream maps it back to the URI its own client named.
-- KEYS[1] the resource's subscribers (zset: sref -> until when, ms)
-- ARGV[1] the resource's channel, ARGV[2] the message ('res:<digest>'), ARGV[3] the sessions'
-- key prefix ('<p>:s:'; a session's channel is that, its sref and ':ev')
-- returns how many sessions were told.
-- NOTE: one step with the subscribes (resource_subscribe.lua): a session whose subscribe was
-- answered before this runs is told. Channels are not keys: a script may publish on any.
redis.call('PUBLISH', ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)  -- sessions gone (no refresh since)
local srefs = redis.call('ZRANGE', KEYS[1], 0, -1)
for _, sref in ipairs(srefs) do
  redis.call('PUBLISH', ARGV[3] .. sref .. ':ev', ARGV[2])
end
return #srefs
