-- Extends the lease of the step a worker is running, and arq's claim on the job running it: a worker
-- that dies mid-step leaves both to lapse together, so neither outlives the other.
--
-- KEYS and ARGV[1..3]: the layout of lib/run.lua.  KEYS[13] arq's claim on this try's job
-- (arq:in-progress:<job id>; extended only if it exists: arq set it when the job was taken)
-- ARGV[4] step  ARGV[5] attempt  ARGV[6] lease ms
-- Returns {0, 1, {}} renewed; {0, 0, {}} the step is no longer this worker's (reclaimed, cancelled,
-- ended): the worker stops and commits nothing.

--!include lib/core.lua
--!include lib/run.lua

local S = sb_run_context()
local current = sb_current_step(S, tonumber(ARGV[4]), tonumber(ARGV[5]))
if not current or current.state ~= 'running' then return sb_reply(0, S.owe) end
sb_hold_step(S, tonumber(ARGV[6]))
redis.call('PEXPIRE', KEYS[13], tonumber(ARGV[6]))
return sb_reply(1, S.owe)
