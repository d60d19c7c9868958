-- unlock: release a lock only if this caller still holds it (its token). Compare and delete in
-- one step: a holder whose lock expired and was taken by another must not delete the new one.
-- KEYS[1] lock key; ARGV[1] token; returns 1 if released, 0 if not held
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
