-- A debounce timer is due: start what waits in the queue, unless newer input pushed the timer on (then
-- it is set again) or a run is active (its end starts the queue).
--
--!layout lib/run.lua   (run_id is '')
--
-- Returns {'ok'}.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
redis.call('ZREM', SB_P.dequeue, S.sid)
if sb_session_live(S) and redis.call('EXISTS', S.run) == 0 then sb_start_next(S) end
return sb_reply()
