-- Records a client's progress on a call it acked: `client_tool_progress`, which readers see only when they
-- ask for it (?include=progress). For a tool that declared `heartbeat_s`, the result deadline moves to a
-- heartbeat from now, never past the tool's timeout (or the deployment's result deadline) after the ack.
-- Answers as a hot route (lib/hot.lua).
--
--!layout lib/call.lua
--!layout lib/hot.lua
--!arg event       the client_tool_progress event JSON
--!arg result_ms   the deployment's result deadline (ms)
-- Returns {'ok', the event}; refusals: not_found (no such call for this client, or no session), conflict
-- (not acked yet, settled, or the session's storage is full: SWITCHBOARD_MAX_SESSION_BYTES), unauthorized.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/call.lua
--!include lib/hot.lua

local S = sb_call_context()
local H = sb_hot_context()
local rec, refused = sb_hot_own_call(S, H)
if not rec then return refused end
if rec.state == 'dispatched' then
  return sb_hot_keep(S, H, sb_refuse('conflict', 'call_not_acked', S.call_id))
end
if rec.state ~= 'acked' then
  return sb_hot_keep(S, H, sb_settled_refusal(S, rec))
end
local full = sb_hot_room(S, H, #A.event + SB_ENTRY)
if full then return full end
-- While the call waits on a person (an open input request) its heartbeat is paused: progress moves nothing.
if rec.hb and not rec.pz then
  local due = S.now + rec.hb
  local limit = sb_result_limit(S, rec, tonumber(A.result_ms))
  if due > limit then due = limit end
  sb_timer(SB_P.deadlines, due, S.sid .. ':' .. S.call_id)
end
return sb_hot_reply(S, H, (sb_append(S, A.event)))
