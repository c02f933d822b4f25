-- Dispatches a call that no run made (an MCP client's, through /v1/sessions/{sid}/mcp) to the registration
-- that serves the tool, under the agent's policy as a step's call is (commit_step.lua): `allow` sends it
-- (the call record, the registration's call stream, `client_tool_dispatched` with the extension field
-- `"from":"mcp"`, the ack deadline); `require_approval` is decided at once by a decision remembered for
-- the session under the tool's model-visible name, else the record waits (`awaiting`; a timer only when
-- the policy gives the approval a deadline) with `approval_requested`, and the decision sends it or
-- denies it (resolve_approval.lua). A `deny` never gets here: the caller answers it without writing
-- anything. The record's run is '', so settling the call (a result, a failure, a cancel) continues no run.
--
--!layout lib/call.lua   (cid is the client id)
--!key client       the client hash
--!key stream       its call stream
--!arg tool         raw tool name
--!arg event        the client_tool_dispatched JSON
--!arg ack_ms       ack deadline (ms)
--!arg retention_ms call stream retention (ms)
--!arg timeout_ms   the tool's result deadline (ms; '' for the deployment's)
--!arg heartbeat_ms its heartbeat (ms; '' for none)
--!arg policy       'allow' | 'require_approval' (anything else waits for approval)
--!arg name         the model-visible tool name, which a remembered decision is kept under
--!arg approval     the approval_requested JSON ('' for allow)
--!arg on_leave     'wait' when the call waits for its client should the registration go ('' fails it)
--!arg approval_timeout_ms  how long the approval waits before it resolves as a deny (ms; '' for ever)
--
-- Returns {'ok', 'dispatched', seq of client_tool_dispatched}, {'ok', 'awaiting', seq of
-- approval_requested}, or {'ok', 'denied', the denial's tool_result as stored} (a deny remembered for
-- the session); refusal not_found (no session; the registration is not active or does not serve the
-- tool); refusal conflict when the session's storage is full (SWITCHBOARD_MAX_SESSION_BYTES).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/call.lua
--!include lib/client.lua

local S = sb_call_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
if not sb_holds(K.client, A.tool, {}) then return sb_refuse('not_found', 'no_tool', S.cid, A.tool) end
-- The event is kept twice (the log, and the record or the call stream), the approval once, a remembered
-- decision's two events are small.
local full = sb_room(S.meta, S.now, 2 * #A.event + #A.approval + #A.name + 6 * SB_ENTRY + 512, SB_P.cap)
if full then return full end
-- `at`: when the call was made, which an MCP task (api/mcp/tasks.py) reports as its createdAt.
local rec = {kind = 'client', client = S.cid, run = '', step = 0, tool = A.tool, src = 'mcp', at = S.now,
  to = tonumber(A.timeout_ms), hb = tonumber(A.heartbeat_ms), ol = A.on_leave == 'wait' and 1 or nil}
local outcome = A.policy == 'allow' and 'allow' or 'require_approval'
if outcome == 'require_approval' then
  rec.name = A.name
  local remembered = redis.call('HGET', S.meta, SB_REMEMBER .. A.name)
  if remembered then
    local denial
    outcome, denial = sb_remembered(S, S.call_id, remembered)
    if outcome == 'denied' then return sb_reply('denied', denial) end
  end
end
if outcome == 'require_approval' then
  rec.state = 'awaiting'
  rec.dispatch = A.event
  sb_approval_deadline(S, S.call_id, rec, A.approval_timeout_ms)
  sb_put_call(S.meta, S.calls, S.call_id, rec)
  redis.call('HSET', S.owed, S.call_id, S.cid)
  local _, seq = sb_append(S, A.approval)
  return sb_reply('awaiting', seq)
end
local event = sb_dispatch(S, rec, K.stream, A.event, tonumber(A.ack_ms), tonumber(A.retention_ms))
return sb_reply('dispatched', string.match(event, '^{"seq":(%d+)'))
