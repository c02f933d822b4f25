-- Extends the lease of the step a worker is running: a worker that dies mid-step leaves it to lapse, and
-- the timekeeper then gives the step to another worker (reclaim_step.lua).
--
--!layout lib/run.lua
--!arg step        the step
--!arg attempt     its try
--!arg lease_ms    the step's lease (ms)
--
-- Returns {'ok', 1} renewed; {'ok', 0} the step is no longer this worker's (reclaimed, cancelled, ended): the
-- worker stops and commits nothing.

--!include lib/core.lua
--!include lib/partition.lua
--!include lib/run.lua

local S = sb_run_context()
local current = sb_current_step(S, tonumber(A.step), tonumber(A.attempt))
if not current or current.state ~= 'running' then return sb_reply(0) end
sb_hold_step(S, tonumber(A.lease_ms))
return sb_reply(1)
