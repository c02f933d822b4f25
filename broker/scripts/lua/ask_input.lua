-- A client asks the person during a call it acked (an input request, as MCP elicitation has them): the
-- request's entry in the session's inputs hash, its key taken within the call, `input_requested`, and
-- for the call's first open request its deadlines paused (lib/call.lua sb_pause_deadline). A refusal has
-- written nothing.
--
--!layout lib/call.lua   (cid is the asking client)
--!key inputs        the session's input requests (hash: request id -> entry; key field -> request id)
--!arg request_id    the new request's id
--!arg key           its name within the call
--!arg key_field     the field that holds the key taken within the call
--!arg entry         its entry (JSON), as broker/services/inputs.py reads it back
--!arg message       what the person is asked
--!arg schema        the form's JSON ('' for a URL-mode request)
--!arg url           the page the person is sent to ('' for a form)
--!arg max_open      how many requests a call may hold open at once
--
-- Returns {'ok'}; refusals: not_found (no session, no call), conflict (another client's call, not acked,
-- settled, the key taken in this call, or the session's storage full: SWITCHBOARD_MAX_SESSION_BYTES),
-- too_many_requests (the call holds max_open open requests).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/call.lua

local S = sb_call_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local rec = sb_call(S)
if not rec then return sb_refuse('not_found', 'no_call_in_session', S.call_id) end
if rec.kind ~= 'client' or rec.client ~= S.cid then return sb_refuse('conflict', 'input_not_yours', S.call_id) end
if rec.state == 'dispatched' or rec.state == 'waiting' then
  return sb_refuse('conflict', 'input_not_acked', S.call_id)
end
if rec.state ~= 'acked' then return sb_settled_refusal(S, rec) end
local open = rec.iro or {}
local max_open = tonumber(A.max_open)
if #open >= max_open then return sb_refuse('too_many_requests', 'too_many_inputs', S.call_id, max_open) end
if redis.call('HEXISTS', K.inputs, A.key_field) == 1 then
  return sb_refuse('conflict', 'input_key_taken', A.key, S.call_id)
end
local id = A.request_id
-- As trim_calls.lua gives it back when the call is forgotten.
local stored = #A.entry + #A.key_field + 2 * (#id + SB_ENTRY)
-- The event holds the message, the form or page and the key again; the record grows by the id twice.
local full = sb_room(S.meta, S.now, stored + #A.message + #A.schema + #A.url + #A.key + 3 * #id + SB_ENTRY + 512,
  SB_P.cap)
if full then return full end
redis.call('HSET', K.inputs, id, A.entry, A.key_field, id)
sb_add(S.meta, stored)
open[#open + 1] = id
rec.iro = open
-- Every request the call made, which leave with its record (trim_calls.lua).
rec.irs = rec.irs or {}
rec.irs[#rec.irs + 1] = id
if #open == 1 then sb_pause_deadline(S, rec) end
sb_put_call(S.meta, S.calls, S.call_id, rec)
sb_append(S, sb_ev_input_requested(id, S.call_id, S.cid, rec.tool, A.key, A.message, 'client',
  A.schema ~= '' and A.schema or nil, A.url ~= '' and A.url or nil))
return sb_reply()
