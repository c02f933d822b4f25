-- Ends the run from the worker holding try ARGV[5] of step ARGV[4]: run_failed (the model failed for
-- good) or run_cancelled (a cancel seen at a checkpoint). Owed calls fail with run_gone first.
--
-- KEYS and ARGV[1..3]: the layout of lib/run.lua.
-- ARGV[4] step  ARGV[5] attempt  ARGV[6] 'run_failed' | 'run_cancelled'  ARGV[7] error text
-- ARGV[8] text for run_gone
-- Returns {0, 'ended' | 'stale'}; {404, 'session'}.

--!layout lib/run.lua
--!include lib/core.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse(404, 'session') end
if not sb_current_step(S, tonumber(ARGV[4]), tonumber(ARGV[5])) then return sb_reply('stale') end
sb_end_run(S, ARGV[6], ARGV[7], ARGV[8])
return sb_reply('ended')
