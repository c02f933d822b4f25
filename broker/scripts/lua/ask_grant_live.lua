-- A grant's server of an older protocol (2025-11-25 and before) asked for input with `elicitation/create`
-- during a call, which its server holds open meanwhile (checked by the worker): the request becomes one
-- of the session's input requests (`input_requested` with source `mcp` and the grant's name), and the
-- call stays `running` under the worker's renewed lease, which waits for the answer and hands it to the
-- server. Unlike ask_grant_input.lua nothing is parked: answer_input.lua takes the request off the
-- call's open ones and leaves a running call to its worker; one left unanswered ends with its call
-- (lib/calls.lua sb_settle). A refusal has written nothing.
--
--!layout lib/call.lua   (cid is '')
--!key inputs        the session's input requests
--!arg request_id    the new request's id
--!arg key           the server's id of its request
--!arg entry         its entry (JSON), as broker/services/inputs.py reads it back
--!arg message       what the person is asked
--!arg schema        the form's JSON ('' for a URL-mode request)
--!arg url           the page the person is sent to ('' for a form)
--!arg grant         the grant's name
--
-- Returns {'ok', 'asked'} or {'ok', 'stale'} (the call is no longer running, or the session is gone);
-- refusal conflict (the session's storage full: SWITCHBOARD_MAX_SESSION_BYTES).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/call.lua

local S = sb_call_context()
local rec = sb_call(S)
if not rec or rec.kind ~= 'server' or rec.state ~= 'running' or not sb_session_live(S) then
  return sb_reply('stale')
end
local id = A.request_id
-- As trim_calls.lua gives it back when the call is forgotten (no key field: the server's ids are its own).
local stored = #A.entry + 2 * (#id + SB_ENTRY)
local need = stored + #A.message + #A.schema + #A.url + #A.key + #A.grant + 3 * #id + SB_ENTRY + 512
local full = sb_room(S.meta, S.now, need, SB_P.cap)
if full then return full end
redis.call('HSET', K.inputs, id, A.entry)
sb_add(S.meta, stored)
rec.iro = rec.iro or {}
rec.iro[#rec.iro + 1] = id
rec.irs = rec.irs or {}
rec.irs[#rec.irs + 1] = id
sb_put_call(S.meta, S.calls, S.call_id, rec)
sb_append(S, sb_ev_input_requested(id, S.call_id, '', rec.tool, A.key, A.message, 'mcp',
  A.schema ~= '' and A.schema or nil, A.url ~= '' and A.url or nil, A.grant))
return sb_reply('asked')
