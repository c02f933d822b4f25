-- Library: a session's end: deleted on request (delete_session.lua) or for lack of use (retain_session.lua).
-- Needs lib/core.lua, lib/partition.lua, lib/calls.lua and lib/run.lua.

-- Deletes a session (S: sb_run_context, its session live). Its active run ends first (owed calls fail
-- with run_gone, then run_cancelled), and so does every queued run, so live streams see each run end;
-- then `deleted` goes out on the channel, the session leaves its partition's indexes, and the log and
-- state go. The record and `tokens` stay as a tombstone for `tombstone_ms`; per-client keys are purged
-- by the timekeeper (purge index), which also takes the session out of the workspace's indexes.
local function sb_delete_session(S, tokens, tombstone_ms, gone_text)
  -- Nothing may start once the session is going: the queue is taken before the active run ends.
  local queued = redis.call('LRANGE', S.queue, 0, -1)
  redis.call('DEL', S.queue)
  if redis.call('EXISTS', S.run) == 1 then sb_end_run(S, 'run_cancelled', nil, gone_text) end
  for _, raw in ipairs(queued) do
    sb_append(S, sb_ev_run_cancelled(cjson.decode(raw).run_id))
    sb_count('runs_ended:run_cancelled')
  end
  local names = redis.call('HGETALL', S.names)
  if #names > 0 then sb_count('clients_active', -(#names / 2)) end
  for i = 2, #names, 2 do redis.call('ZREM', SB_P.leases, S.sid .. ':' .. names[i]) end
  redis.call('ZREM', SB_P.dequeue, S.sid)
  redis.call('ZREM', SB_P.purges, 'r|' .. S.sid, 'c|' .. S.sid)
  sb_publish(S.channel, 'deleted')
  redis.call('HSET', S.meta, 'deleted', '1')
  sb_timer(SB_P.purges, S.now, S.sid)
  redis.call('UNLINK', S.events, S.names, S.calls, S.owed, S.run, S.inbox)
  redis.call('PEXPIRE', S.meta, tombstone_ms)
  redis.call('PEXPIRE', tokens, tombstone_ms)
end

-- When the session was last active (ms): its newest event's time, or its creation.
local function sb_last_activity(S)
  local newest = redis.call('XREVRANGE', S.events, '+', '-', 'COUNT', 1)[1]
  if newest then
    local y, m, d, hh, mi, ss = string.match(newest[2][2], '"created_at":"(%d+)%-(%d+)%-(%d+)T(%d+):(%d+):(%d+)')
    if y then
      y, m, d = tonumber(y), tonumber(m), tonumber(d)
      -- days from civil (H. Hinnant), the inverse of sb_iso's
      if m <= 2 then y = y - 1 end
      local era = math.floor(y / 400)
      local yoe = y - era * 400
      local doy = math.floor((153 * (m > 2 and m - 3 or m + 9) + 2) / 5) + d - 1
      local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
      local days = era * 146097 + doe - 719468
      return ((days * 24 + tonumber(hh)) * 60 + tonumber(mi)) * 60000 + tonumber(ss) * 1000
    end
  end
  return tonumber(redis.call('HGET', S.meta, 'created_at') or S.now)
end
