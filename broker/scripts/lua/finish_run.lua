-- Ends the run from the worker holding try `attempt` of step `step`: run_failed (the model failed for
-- good) or run_cancelled (a cancel seen at a checkpoint). Owed calls fail with run_gone first.
--
--!layout lib/run.lua
--!arg step        the step
--!arg attempt     its try
--!arg outcome     'run_failed' | 'run_cancelled'
--!arg error       error text
--!arg gone_text   text for run_gone
--
-- Returns {'ok', 'ended' | 'stale'}; refusal not_found.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
if not sb_current_step(S, tonumber(A.step), tonumber(A.attempt)) then return sb_reply('stale') end
sb_end_run(S, A.outcome, A.error, A.gone_text)
return sb_reply('ended')
