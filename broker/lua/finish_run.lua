-- Ends the run at step ARGV[4] from its worker: run_failed (model error) or run_cancelled (a cancel seen at
-- a checkpoint). Owed calls fail with run_gone first.
--
-- KEYS and ARGV[1..3]: the layout of lib/run.lua.
-- ARGV[4] step  ARGV[5] 'run_failed' | 'run_cancelled'  ARGV[6] error text  ARGV[7] text for run_gone
-- Returns {0, 'ended' | 'stale'}; {404, msg} no session.

--!include lib/core.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse(404, 'session') end
if not sb_current_step(S, tonumber(ARGV[4])) then return sb_reply('stale') end
sb_end_run(S, ARGV[5], ARGV[6], ARGV[7])
return sb_reply('ended')
