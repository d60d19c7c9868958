-- report: the running tool sets statusMessage; `reports` counts them (progress notifications).
-- KEYS[1] task; ARGV[1] gen, ARGV[2] message, ARGV[3] how many reports it stands for (the
-- worker writes only the latest of several made within MCPQ_REPORT_DELAY_MS), ARGV[4] when the
-- tool made it ('' = now): lastUpdatedAt is when the status changed, not when it was written
-- returns 'OK' or 'GONE' | 'SUPERSEDED' | 'TERMINAL'
local bad, cur = fence(KEYS[1], ARGV[1], 'reports', 'watch', 'sync', 'push')
if bad then return bad end
local at = now
if ARGV[4] and ARGV[4] ~= '' then at = tonumber(ARGV[4]) end
redis.call('HSET', KEYS[1], 'msg', ARGV[2], 'updated_ms', at,
           'reports', (tonumber(cur[3]) or 0) + tonumber(ARGV[3]))
publish(KEYS[1], cur[4], cur[5], cur[6])
return 'OK'
