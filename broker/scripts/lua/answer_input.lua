-- Answers an input request: the first answer wins. Its entry keeps the answer (and drops the form it no
-- longer needs), `input_provided` tells the asking client, and once the call has no open request left its
-- deadlines run again (lib/call.lua sb_resume_deadline). A refusal has written nothing.
--
--!layout lib/call.lua   (cid is ''; call_id the request's call, as its entry names it)
--!key inputs        the session's input requests
--!arg request_id    the request answered
--!arg answered      its entry once answered (JSON)
--!arg action        accept | decline | cancel
--!arg content       what the person filled in (JSON; '' for none)
--!arg result_ms     the deployment's result deadline (ms)
--
-- Returns {'ok', the input_provided event}; refusals: not_found (no session, no such request), conflict
-- (answered already, ended with its call, or the session's storage full: SWITCHBOARD_MAX_SESSION_BYTES).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/call.lua

local S = sb_call_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local id = A.request_id
local raw = redis.call('HGET', K.inputs, id)
if not raw then return sb_refuse('not_found', 'no_input', id) end
local entry = cjson.decode(raw)
if entry.call_id ~= S.call_id then return sb_refuse('not_found', 'no_input', id) end
if entry.state == 'answered' then return sb_refuse('conflict', 'input_answered', id, entry.action) end
local rec = sb_call(S)
local open, at = rec and rec.iro or {}, nil
for i, open_id in ipairs(open) do
  if open_id == id then at = i end
end
if not at then return sb_refuse('conflict', 'input_ended', id, S.call_id) end
local full = sb_room(S.meta, S.now, #A.answered - #raw + 2 * #A.content + #id + SB_ENTRY + 512, SB_P.cap)
if full then return full end
redis.call('HSET', K.inputs, id, A.answered)
sb_add(S.meta, #A.answered - #raw)
table.remove(open, at)
if #open == 0 then
  rec.iro = nil
  if rec.kind == 'server' then
    -- A grant's call parked on its server's questions (ask_grant_input.lua): queued for the worker that
    -- retries it with the answers; its deadline timer (the end of its timeout_s) goes, the worker keeps it.
    -- One a worker took up already (its time ran out meanwhile) is that worker's to settle.
    if rec.state == 'parked' then
      rec.state = 'queued'
      redis.call('ZREM', SB_P.deadlines, S.sid .. ':' .. S.call_id)
      sb_owe('t|' .. S.sid .. '|' .. S.call_id)
    end
  else
    sb_resume_deadline(S, rec, tonumber(A.result_ms))
  end
end
sb_put_call(S.meta, S.calls, S.call_id, rec)
local event = sb_append(S, sb_ev_input_provided(id, S.call_id, rec.client, A.action,
  A.content ~= '' and A.content or nil))
return sb_reply(event)
