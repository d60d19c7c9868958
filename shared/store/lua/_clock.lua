-- Prepended by shared/store/scripts.py to the scripts that use `now` (only those: TIME is a
-- command too). Time comes from Redis itself, so every process (web replicas, workers on other
-- hosts) shares one clock for leases and timestamps.
local _t = redis.call('TIME')
local now = tonumber(_t[1]) * 1000 + math.floor(tonumber(_t[2]) / 1000)
