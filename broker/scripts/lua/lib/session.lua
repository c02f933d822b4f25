-- Library: a session's end: deleted on request (delete_session.lua) or for lack of use (retain_session.lua).
-- Needs lib/core.lua, lib/partition.lua, lib/calls.lua and lib/run.lua.

-- Deletes a session (S: sb_run_context, its session live). Its active run ends first (owed calls fail
-- with run_gone, then run_cancelled), and so does every queued run, so live streams see each run end;
-- then `deleted` goes out on the channel, the session leaves its partition's indexes, and the log and
-- state go. The record and `tokens` stay as a tombstone for `tombstone_ms`; per-client keys are purged
-- by the timekeeper (purge index), which also takes the session out of the workspace's indexes.
-- Its schedules (hash `schedules`) leave the partition's schedule index with it.
local function sb_delete_session(S, tokens, schedules, tombstone_ms, gone_text)
  -- Nothing may start once the session is going: the queue is taken before the active run ends.
  local queued = redis.call('LRANGE', S.queue, 0, -1)
  redis.call('DEL', S.queue)
  -- The active run's id is given back: its trace's spans are made by the caller, the log being gone.
  local active = redis.call('HGET', S.run, 'run_id') or ''
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
  for _, id in ipairs(redis.call('HKEYS', schedules)) do redis.call('ZREM', SB_P.schedules, S.sid .. ':' .. id) end
  sb_publish(S.channel, 'deleted')
  redis.call('HSET', S.meta, 'deleted', '1')
  sb_timer(SB_P.purges, S.now, S.sid)
  redis.call('UNLINK', S.events, S.names, S.calls, S.owed, S.run, S.inbox, schedules)
  redis.call('PEXPIRE', S.meta, tombstone_ms)
  redis.call('PEXPIRE', tokens, tombstone_ms)
  return active
end

-- When the session was last active (ms): when its newest event was appended, which sb_flush_use keeps in
-- meta (SB_EVENT_AT) with the seq. A session stored before that field was kept has none: it is taken as
-- active now, and that is recorded, so it is never purged early (it is kept one retention from the first
-- check after the upgrade) and still purged once that much idle time has passed.
local function sb_last_activity(S)
  local at = redis.call('HGET', S.meta, SB_EVENT_AT)
  if at then return tonumber(at) end
  redis.call('HSET', S.meta, SB_EVENT_AT, sb_int(S.now))
  return S.now
end
