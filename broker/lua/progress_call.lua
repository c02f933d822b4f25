-- Records a client's progress on a call it acked: `client_tool_progress`, which readers see only when they
-- ask for it (?include=progress). For a tool that declared `heartbeat_s`, the result deadline moves to a
-- heartbeat from now, never past the tool's timeout (or the deployment's result deadline) after the ack.
-- Answers as HTTP (lib/http.lua).
--
--!layout lib/call.lua
--!layout lib/http.lua
--!arg event       the client_tool_progress event JSON
--!arg result_ms   the deployment's result deadline (ms)
-- Returns {HTTP status, body}: 200 and the event; 404 (no such call for this client, or no session); 409
-- (not acked yet, settled, or the session's storage is full: SWITCHBOARD_MAX_SESSION_BYTES); 401 (token).

--!include lib/core.lua
--!include lib/partition.lua
--!include lib/call.lua
--!include lib/http.lua

local S = sb_call_context()
local H = sb_http_context()
local rec, refused = sb_http_own_call(S, H)
if not rec then return refused end
if rec.state == 'dispatched' then
  return sb_http_refuse(S, H, 409, 'call ' .. S.call_id .. ' is not acknowledged yet: ack it before sending progress')
end
if rec.state ~= 'acked' then
  local refusal = sb_settled_refusal(S, rec)
  return sb_http_refuse(S, H, refusal[1], refusal[2])
end
local full = sb_http_room(S, H, #A.event + SB_ENTRY)
if full then return full end
if rec.hb then
  local due = S.now + rec.hb
  local limit = (rec.acked_ms or S.now) + (rec.to or tonumber(A.result_ms))
  if due > limit then due = limit end
  sb_timer(SB_P.deadlines, due, S.sid .. ':' .. S.call_id)
end
return sb_http_reply(S, H, 200, (sb_append(S, A.event)))
