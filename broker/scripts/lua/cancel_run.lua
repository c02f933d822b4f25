-- Cancels the active run. A run that waits (on clients, approvals, or its job) ends now: owed calls fail
-- with run_gone, then run_cancelled, and the next queued input starts. A run whose step is running is
-- flagged, and its worker ends it at the next checkpoint.
--
--!layout lib/run.lua   (run_id is '')
--!arg gone_text   text for run_gone
--
-- Returns {'ok', run id or '', 'ended' | 'flagged' | 'idle'}; refusal not_found.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local run = redis.call('HMGET', S.run, 'run_id', 'state')
if not run[1] then return sb_reply('', 'idle') end
if run[2] == 'running' then
  redis.call('HSET', S.run, 'cancel', '1')
  return sb_reply(run[1], 'flagged')
end
return sb_reply(sb_end_run(S, 'run_cancelled', nil, A.gone_text), 'ended')
