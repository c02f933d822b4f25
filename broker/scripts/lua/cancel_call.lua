-- Cancels one call the run still waits for, and the run goes on: a client call fails with reason
-- `run_gone` and `"detail":"cancelled"` (`client_tool_failed`), a call waiting for approval is resolved as
-- denied, and every one gets its error `tool_result` carrying the message; the step continues once its
-- last call is settled. A result or ack that comes later is a conflict, as for any settled call.
--
--!layout lib/call.lua   (cid is '')
--!arg text        the text of the error result
--
-- Returns {'ok', client_tool_failed JSON or ''}; refusal not_found; refusal conflict (settled).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/call.lua

local S = sb_call_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local rec = sb_call(S)
if not rec then return sb_refuse('not_found', 'no_call_in_session', S.call_id) end
local owed = {
  awaiting = true, queued = true, dispatched = true, acked = true, running = true, waiting = true, parked = true,
}
if not owed[rec.state] then return sb_settled_refusal(S, rec) end
return sb_reply(sb_fail_call(S, S.call_id, rec, 'run_gone', A.text, 'cancelled') or '')
