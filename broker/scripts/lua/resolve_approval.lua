-- Decides a call waiting for approval; the first decision wins. `approval_resolved` goes first; a deny
-- then gives the model an error result carrying the message; an allow dispatches a client call to the
-- registration it was bound to (or fails it with client_gone if that one has left or no longer offers
-- the tool) and queues a server call for a worker. An allow may carry edited arguments (the caller
-- checked them against the tool's schema): the call runs with those, and `approval_resolved` shows them
-- next to the model's in `tool_call`. `remember` keeps the decision for the tool's model-visible name:
-- later calls of it in this session are decided the same way when their step commits (commit_step.lua).
--
--!layout lib/call.lua   (cid is '')
--!key client        the bound client's hash
--!key stream        its call stream (unused for a server call)
--!arg decision      'allow' | 'deny'
--!arg message       deny message ('' for none)
--!arg resolved_by   who decided
--!arg ack_ms        ack deadline (ms)
--!arg retention_ms  call stream retention (ms)
--!arg bound         the client id the caller read
--!arg remember      'session' to remember the decision ('' not to)
--!arg edited        edited arguments JSON ('' for none)
--!arg dispatch      the client_tool_dispatched JSON carrying them ('' for none, or a server call)
--
-- Returns {'ok', approval_resolved event JSON}; refusal not_found; refusal conflict decided already, or
-- the session's storage has no room for the decision (SWITCHBOARD_MAX_SESSION_BYTES);
-- {'ok', 'retry'} the call's bound client is not the one the caller read (read it again).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/call.lua
--!include lib/client.lua

local S = sb_call_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local rec = sb_call(S)
if not rec then return sb_refuse('not_found', 'no_call_in_session', S.call_id) end
if rec.state ~= 'awaiting' then
  if rec.decision then return sb_refuse('conflict', 'call_decided', S.call_id, rec.decision) end
  return sb_refuse('conflict', 'call_not_awaiting', S.call_id)
end
if rec.kind == 'client' and rec.client ~= A.bound then return sb_reply('retry') end
local decision, message, remember, edited = A.decision, A.message, A.remember, A.edited
-- The message and edited arguments are kept in the decision's event, and again in what it leads to.
local full = sb_room(S.meta, S.now, 2 * (#message + #edited + #A.dispatch) + 4 * SB_ENTRY + 256, SB_P.cap)
if full then return full end
-- A person decided before the approval's deadline: its timer goes (an allowed call's own deadlines
-- replace it). After the room check: a refused decision leaves the approval waiting, timer and all.
if rec.expires then
  redis.call('ZREM', SB_P.deadlines, S.sid .. ':' .. S.call_id)
  rec.expires, rec.ato = nil, nil
end
local deny = (decision == 'deny' and message ~= '') and message or nil
local resolved = sb_append(S, sb_ev_approval_resolved(S.call_id, decision, deny, A.resolved_by,
  remember ~= '' and 'session' or nil, nil, edited ~= '' and edited or nil))
rec.decision = decision
if remember ~= '' and rec.name then
  redis.call('HSET', S.meta, SB_REMEMBER .. rec.name, decision .. '|' .. A.resolved_by .. '|' .. message)
end
if decision == 'deny' then
  sb_append(S, sb_denial(S.call_id, message))
  sb_settle(S, S.call_id, rec, 'denied', 'denied')
elseif rec.kind == 'server' then
  rec.state = 'queued'
  if edited ~= '' then rec.args = edited end
  sb_put_call(S.meta, S.calls, S.call_id, rec)
  sb_owe('t|' .. S.sid .. '|' .. S.call_id)
elseif redis.call('HGET', K.client, 'state') ~= 'active' then
  rec.state = 'allowed'
  sb_fail_call(S, S.call_id, rec, 'client_gone', 'the client left before the call was approved')
elseif not sb_holds(K.client, rec.tool, {}) then
  rec.state = 'allowed'
  sb_fail_call(S, S.call_id, rec, 'client_gone',
    'the client no longer offers ' .. rec.tool .. ', so the call was not sent')
else
  local dispatch = A.dispatch ~= '' and A.dispatch or rec.dispatch
  rec.dispatch = nil
  sb_dispatch(S, rec, K.stream, dispatch, tonumber(A.ack_ms), tonumber(A.retention_ms))
end
return sb_reply(resolved)
