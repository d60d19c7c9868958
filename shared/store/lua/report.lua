-- report: the running tool sets statusMessage (with report_progress's numbers), and sends the
-- log messages a synchronous call's stream is to pass on; `reports` counts the statuses
-- (progress notifications), `logs` the messages.
-- KEYS[1] task; ARGV[1] gen, ARGV[2] message, ARGV[3] how many reports it stands for (the
-- worker writes only the latest of several made within MCPQ_REPORT_DELAY_MS; 0: no status,
-- only log messages), ARGV[4] when the tool made it ('' = now): lastUpdatedAt is when the status
-- changed, not when it was written; ARGV[5] progress ('' = a plain report: the numbers stay as
-- they were), ARGV[6] total ('' = none); ARGV[7] the run's number of the first log message,
-- ARGV[8..] the messages (sealed JSON)
-- returns 'OK' or 'GONE' | 'SUPERSEDED' | 'TERMINAL'
local LOG_KEEP = 100  -- records.LOG_KEEP: how many of a call's log messages are kept
local bad, cur = fence(KEYS[1], ARGV[1], 'reports', 'watch', 'sync', 'push', 'logs')
if bad then return bad end
local count = tonumber(ARGV[3])
if count > 0 then
  local at = now
  if ARGV[4] ~= '' then at = tonumber(ARGV[4]) end
  redis.call('HSET', KEYS[1], 'msg', ARGV[2], 'updated_ms', at,
             'reports', (tonumber(cur[3]) or 0) + count)
  if ARGV[5] ~= '' then
    redis.call('HSET', KEYS[1], 'prog', ARGV[5])
    if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'total', ARGV[6])
    else redis.call('HDEL', KEYS[1], 'total') end
  end
end
-- Log messages are numbered in the order the tool made them, and a run re-made from the top
-- (a replay after a park or a lost worker) makes the same ones again: only those past the
-- stored count are new, so a stream never sends one twice. Only a synchronous call keeps them
-- (only its stream sends them), its last LOG_KEEP: a reader that fell further behind skips.
local logs = tonumber(cur[7]) or 0
if #ARGV > 7 and cur[5] == '1' then
  local first = tonumber(ARGV[7])
  for i = 8, #ARGV do
    local n = first + i - 8
    if n > logs then
      redis.call('HSET', KEYS[1], 'log:' .. n, ARGV[i])
      if n > LOG_KEEP then redis.call('HDEL', KEYS[1], 'log:' .. (n - LOG_KEEP)) end
      logs = n
    end
  end
  redis.call('HSET', KEYS[1], 'logs', logs)
end
if count > 0 then
  publish(KEYS[1], cur[4], cur[5], cur[6])
else
  publish(KEYS[1], cur[4], cur[5], false)  -- only messages: nothing a listing shows changed
end
return 'OK'
