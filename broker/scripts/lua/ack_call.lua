-- Acknowledges a dispatched call: `client_tool_acked`, and the result deadline replaces the ack deadline.
-- A repeated ack of an acked call answers with the same event. Answers as a hot route (lib/hot.lua).
--
--!layout lib/call.lua
--!layout lib/hot.lua
--!key stream      the registration's call stream
--!arg result_ms   the deployment's result deadline (ms)
--!arg member      the pool member acking ('' for a caller outside any pool)
--!arg group       the pool's consumer group
--
-- Returns {'ok', the acked event}; refusals: not_found (no such call for this client, or no session),
-- conflict (settled, not dispatched yet, held by another pool member, or the session's storage is full:
-- SWITCHBOARD_MAX_SESSION_BYTES), unauthorized (token).
--
-- Pools: the member holding the call (pool_take.lua) is the only member whose ack counts, and its ack
-- settles the call's entry in the group, so the call is never handed to another member.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/call.lua
--!include lib/hot.lua

local S = sb_call_context()
local H = sb_hot_context()
local rec, refused = sb_hot_own_call(S, H)
if not rec then return refused end
local member = A.member
if member ~= '' and rec.member and rec.member ~= member then
  return sb_hot_keep(S, H, sb_refuse('conflict', 'call_taken', S.call_id))
end
if rec.state ~= 'dispatched' and rec.state ~= 'acked' then
  return sb_hot_keep(S, H, sb_settled_refusal(S, rec))
end
-- The acked event, and the record's growth.
local full = sb_hot_room(S, H, rec.state == 'acked' and 256 or 2 * SB_ENTRY + 256)
if full then return full end
if rec.state == 'acked' then return sb_hot_reply(S, H, sb_ack_event(S, rec)) end
if member ~= '' then rec.member = member end
return sb_hot_reply(S, H, sb_ack(S, rec, sb_result_window(rec, tonumber(A.result_ms)), {K.stream, A.group}))
