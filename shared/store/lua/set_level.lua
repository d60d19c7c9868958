-- set_level: a 2025-era session's logging/setLevel.
-- KEYS[1] session; ARGV[1] the level
-- returns 1, or 0 when the session is gone: a write after its end (or expiry) would make a
-- hash without its fields or TTL, so it is written only while the session exists.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'log_level', ARGV[1])
return 1
