-- lists_changed: a web process starts and says what it serves (a digest of each list: tools,
-- prompts, resources). A list whose digest differs from the one stored (another process, an
-- earlier deploy, stored it) has changed: its digest is stored and the change announced, once,
-- to every replica's listeners. Two processes starting together with the same lists: the
-- first stores and announces, the second finds nothing changed (one step each).
-- KEYS[1] the listings hash; ARGV[1] the channel, ARGV[2..] name, digest, name, digest...
-- returns the names of the lists that changed.
local changed = {}
for i = 2, #ARGV, 2 do
  local name, digest = ARGV[i], ARGV[i + 1]
  if redis.call('HGET', KEYS[1], name) ~= digest then
    redis.call('HSET', KEYS[1], name, digest)
    redis.call('PUBLISH', ARGV[1], 'list:' .. name)
    changed[#changed + 1] = name
  end
end
return changed
