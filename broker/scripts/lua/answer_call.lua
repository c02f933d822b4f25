-- Records a client's result as the call's `tool_result`; a result without an ack acks first. When it
-- settles the last call of the step, the next step is owed (an entry on the partition's work stream).
-- Answers as a hot route (lib/hot.lua).
--
--!layout lib/call.lua
--!layout lib/hot.lua
--!key stream      the registration's call stream
--!arg event       the tool_result event JSON
--!arg result_ms   the deployment's result deadline (ms)
--!arg group       the pool's consumer group
-- Returns {'ok', ''}; refusals: not_found; conflict (already settled, or the session's storage is full:
-- SWITCHBOARD_MAX_SESSION_BYTES, and the call stays owed); unauthorized (token).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/call.lua
--!include lib/hot.lua

local S = sb_call_context()
local H = sb_hot_context()
local rec, refused = sb_hot_own_call(S, H)
if not rec then return refused end
if rec.state ~= 'dispatched' and rec.state ~= 'acked' then
  return sb_hot_keep(S, H, sb_settled_refusal(S, rec))
end
-- The result's event, an ack's when it acks too, the record's growth, and the input_provided that end
-- the requests it holds open.
local full = sb_hot_room(S, H, #A.event + 3 * SB_ENTRY + 256 + sb_end_inputs_bytes(S.call_id, rec))
if full then return full end
if rec.state == 'dispatched' then sb_ack(S, rec, sb_result_window(rec, tonumber(A.result_ms)), {K.stream, A.group}) end
sb_append(S, A.event)
sb_count('calls_answered')
sb_observe_ms('ack_to_result', S.now - (rec.acked_ms or S.now))
sb_settle(S, S.call_id, rec, 'answered', nil)
return sb_hot_reply(S, H, '')
