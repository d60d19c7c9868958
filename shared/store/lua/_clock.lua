-- Prepended by shared/store/scripts.py to the scripts that use `now`. Time is Redis's own, so
-- every process (web replicas, workers on other hosts) shares one clock for leases and
-- timestamps; the caller reads it once in a while with TIME and sends it as the last ARGV
-- (shared/store/clock.py), which is taken off here: a TIME per script was three or four
-- commands per task. Scripts see ARGV as their header documents it.
local now = tonumber(table.remove(ARGV))
