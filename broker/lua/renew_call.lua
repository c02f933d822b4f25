-- Extends the lease of a running server call, and arq's claim on the job running it (see renew_step).
--
-- KEYS and ARGV[1..4]: the layout of lib/call.lua (ARGV[4] is '').  KEYS[9] arq's claim on the call's
-- job (arq:in-progress:<job id>; extended only if it exists)
-- ARGV[5] lease ms
-- Returns {0, 1} renewed, {0, 0} the call is no longer running (settled or failed as interrupted).

--!include lib/core.lua
--!include lib/call.lua

local S = sb_call_context()
local rec = sb_call(S)
if not rec or rec.state ~= 'running' then return sb_reply(0) end
sb_set_deadline(S, 'lease', tonumber(ARGV[5]))
redis.call('PEXPIRE', KEYS[9], tonumber(ARGV[5]))
return sb_reply(1)
