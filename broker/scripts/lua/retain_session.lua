-- Keeps or purges a session that has had no activity for the retention period (the timekeeper, when the
-- session's retention timer comes due; set at creation). A session is in use while its newest event is
-- younger than the retention, or while it has an active registration (a tab that only pings), a run, a
-- call not yet settled, queued input, or a schedule: then the timer moves on to when that could next be
-- untrue. Otherwise it is deleted as by delete_session.lua, with a short tombstone, and the purge index
-- takes its per-client keys and its entries in the workspace's indexes.
--
--!layout lib/run.lua   (run_id is '')
--!key tokens        the session's tokens
--!key session_schedules the session's schedules
--!arg retention_ms  retention ms (0: kept for ever)
--!arg tombstone_ms  how long the record and tokens of a purged session stay (ms)
--!arg gone_text     text for run_gone
--
-- Returns {'ok', 'kept' | 'purged' | 'gone'}.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua
--!include lib/session.lua

local S = sb_run_context()
local member = 'r|' .. S.sid
if not sb_session_live(S) then
  redis.call('ZREM', SB_P.purges, member)
  return sb_reply('gone')
end
local retention = tonumber(A.retention_ms)
if retention == 0 then
  -- The deployment keeps sessions for ever now: the timer set under an earlier setting is dropped.
  redis.call('ZREM', SB_P.purges, member)
  return sb_reply('kept')
end
-- A parked run (an open approval, or a call not yet settled, a run's or one no run made) keeps its
-- session however long it waits; the clock starts again from the event that ends the wait. A schedule
-- keeps its session too: it will post input, whenever it is due.
local busy = redis.call('HLEN', S.names) > 0 or redis.call('EXISTS', S.run) == 1 or redis.call('LLEN', S.queue) > 0
  or redis.call('HLEN', S.owed) > 0 or redis.call('EXISTS', K.session_schedules) == 1
local idle_until = sb_last_activity(S) + retention
if busy or idle_until > S.now then
  sb_timer(SB_P.purges, busy and S.now + retention or idle_until, member)
  return sb_reply('kept')
end
sb_delete_session(S, K.tokens, K.session_schedules, A.tombstone_ms, A.gone_text)
return sb_reply('purged')
