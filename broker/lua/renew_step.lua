-- Extends the lease of the step a worker is running: a worker that dies mid-step leaves it to lapse, and
-- the timekeeper then gives the step to another worker (reclaim_step.lua).
--
-- KEYS and ARGV[1..3]: the layout of lib/run.lua.
-- ARGV[4] step  ARGV[5] attempt  ARGV[6] lease ms
-- Returns {0, 1} renewed; {0, 0} the step is no longer this worker's (reclaimed, cancelled, ended): the
-- worker stops and commits nothing.

--!layout lib/run.lua
--!include lib/core.lua
--!include lib/partition.lua
--!include lib/run.lua

local S = sb_run_context()
local current = sb_current_step(S, tonumber(ARGV[4]), tonumber(ARGV[5]))
if not current or current.state ~= 'running' then return sb_reply(0) end
sb_hold_step(S, tonumber(ARGV[6]))
return sb_reply(1)
