-- Extends the lease of a running server call.
--
-- KEYS and ARGV[1..4]: the layout of lib/call.lua (ARGV[4] is '').  ARGV[5] lease ms
-- Returns {0, 1} renewed, {0, 0} the call is no longer running (settled or failed as interrupted).

--!layout lib/call.lua
--!include lib/core.lua
--!include lib/partition.lua
--!include lib/call.lua

local S = sb_call_context()
local rec = sb_call(S)
if not rec or rec.state ~= 'running' then return sb_reply(0) end
sb_set_deadline(S, tonumber(ARGV[5]))
return sb_reply(1)
