-- Extends the lease of a running server call.
--
--!layout lib/call.lua   (cid is '')
--!arg lease_ms    the lease (ms)
--
-- Returns {'ok', 1} renewed, {'ok', 0} the call is no longer running (settled or failed as interrupted).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/call.lua

local S = sb_call_context()
local rec = sb_call(S)
if not rec or rec.state ~= 'running' then return sb_reply(0) end
sb_set_deadline(S, tonumber(A.lease_ms))
return sb_reply(1)
