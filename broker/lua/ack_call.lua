-- Acknowledges a dispatched call: `client_tool_acked`, and the result deadline replaces the ack deadline.
-- A repeated ack of an acked call answers with the same event.
--
-- KEYS and ARGV[1..4]: the layout of lib/call.lua.  ARGV[5] result deadline ms
-- Returns {0, acked event JSON}; {404, 'session' | 'call'} unknown session or call, or another client's
-- call; {409, msg} the call is settled or not dispatched yet.

--!include lib/core.lua
--!include lib/call.lua

local S = sb_call_context()
if not sb_session_live(S) then return sb_refuse(404, 'session') end
local rec = sb_own_call(S)
if not rec then return sb_refuse(404, 'call') end
if rec.state == 'acked' then return sb_reply(rec.ack) end
if rec.state ~= 'dispatched' then return sb_settled_refusal(S, rec) end
return sb_reply(sb_ack(S, rec, tonumber(ARGV[5])))
