-- A grant's server asked for input during a call (an InputRequiredResult, its requests checked by the
-- worker): each request becomes one of the session's input requests (`input_requested` with source `mcp`
-- and the grant's name), and the call is parked, held by no worker, until the last is answered
-- (answer_input.lua then queues it again, for the worker that retries the call with the answers) or its
-- grant's timeout_s ends (its deadline timer; expire_call.lua queues it, and the worker fails it). The
-- record keeps the round (`gt`: the requests' keys and ids, the server's requestState) for the retry. A
-- refusal has written nothing.
--
--!layout lib/call.lua   (cid is '')
--!key inputs        the session's input requests
--!arg requests      JSON array of {id, key, key_field, entry (JSON text), message, schema (JSON text or ''), url}
--!arg state         the server's requestState ('' for none)
--!arg grant         the grant's name
--!arg left_ms       the call's time left, from now (ms): kept the first time only
--
-- Returns {'ok', 'parked'} or {'ok', 'stale'} (the call is no longer this worker's); refusal conflict (the
-- session's storage full: SWITCHBOARD_MAX_SESSION_BYTES).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/call.lua

local S = sb_call_context()
local rec = sb_call(S)
if not rec or rec.kind ~= 'server' or rec.state ~= 'running' or not sb_session_live(S) then
  return sb_reply('stale')
end
local requests = cjson.decode(A.requests)
local stored, need = 0, #A.state + 512
for _, r in ipairs(requests) do
  -- As trim_calls.lua gives it back when the call is forgotten (its key field counted, though a grant's
  -- keys are the server's, unique within a round, and no field is kept for them).
  local size = #r.entry + #r.key_field + 2 * (#r.id + SB_ENTRY)
  stored = stored + size
  need = need + size + #r.message + #r.schema + #r.url + #r.key + #A.grant + 3 * #r.id + SB_ENTRY + 512
end
local full = sb_room(S.meta, S.now, need, SB_P.cap)
if full then return full end
local gt = rec.gt or {ov = S.now + tonumber(A.left_ms)}
gt.task = nil
gt.rs = A.state ~= '' and A.state or nil
gt.n = (gt.n or 0) + 1
gt.keys, gt.ids = {}, {}
rec.iro = {}
rec.irs = rec.irs or {}
for _, r in ipairs(requests) do
  redis.call('HSET', K.inputs, r.id, r.entry)
  gt.keys[#gt.keys + 1] = r.key
  gt.ids[#gt.ids + 1] = r.id
  rec.iro[#rec.iro + 1] = r.id
  rec.irs[#rec.irs + 1] = r.id
end
sb_add(S.meta, stored)
rec.gt = gt
rec.state = 'parked'
sb_put_call(S.meta, S.calls, S.call_id, rec)
sb_timer(SB_P.deadlines, gt.ov, S.sid .. ':' .. S.call_id)
for _, r in ipairs(requests) do
  sb_append(S, sb_ev_input_requested(r.id, S.call_id, '', rec.tool, r.key, r.message, 'mcp',
    r.schema ~= '' and r.schema or nil, r.url ~= '' and r.url or nil, A.grant))
end
return sb_reply('parked')
