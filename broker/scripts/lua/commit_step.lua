-- Commits a model step atomically: the assistant message, then per tool call its `tool_call` event and
-- what its policy makes of it: `allow` dispatches a client call (call record, the registration's call
-- stream, `client_tool_dispatched`, the ack deadline) or queues a server call for a worker;
-- `require_approval` appends `approval_requested` and waits (with a timer when its policy gives the
-- approval a deadline: lib/call.lua sb_approval_deadline); `deny`, and a tool that no active
-- registration holds, give the model an error result at once. Then the run completes, waits, or
-- (nothing to wait for) owes its next step.
--
--!layout lib/run.lua
--!key clients...    per client call with a client id, in order: its client hash, then its call stream
--!arg step          the step
--!arg attempt       its try
--!arg ack_ms        ack deadline (ms)
--!arg message       the message_assistant JSON
--!arg gone_text     text for run_gone
--!arg retention_ms  call stream retention (ms)
--!arg timing        the step's timing (a custom event JSON, '' for none)
--!arg usage         the step's token counts, a JSON object of the four SB_USAGE counts it has ('' for none):
--                    added to the run's, which its end reports (sb_end_run)
--!arg calls...      one per tool call, in order: a JSON object (`StepCall` in broker/services/runs.py), its fields
--                    call_id; kind ('client' | 'server' | 'none'); tool, the raw tool name; policy
--                    ('allow' | 'require_approval' | 'deny'); name, the model-visible tool name (a
--                    decision remembered for the session under that name decides a `require_approval`
--                    call at once: resolve_approval.lua); tool_call, its tool_call JSON; error, its error
--                    tool_result JSON (used for deny, or a tool no active registration holds); and,
--                    each left out when it has none: client_name (a registered name to check, none for a
--                    run-scoped client); client_id; payload (client_tool_dispatched JSON for a client
--                    call, the arguments JSON for a server call); approval (approval_requested JSON);
--                    timeout_ms, the tool's result deadline (none: the deployment's); heartbeat_ms;
--                    on_leave, `wait` for a tool whose call waits for its client (none: it fails);
--                    source, a server call's (none for the deployment's own tools, `mcp:<grant>` for an
--                    MCP server's); schema, the JSON Schema an approver's edited arguments are held to
--                    (none: a client tool's is its registration's); approval_timeout_ms, how long a
--                    `require_approval` call's approval waits before it resolves as a deny (none: for ever)
--
-- Returns {'ok', 'completed' | 'waiting' | 'continue' | 'cancelled' | 'stale' | 'retry' | 'failed'};
-- refusal not_found. 'retry': a registered name now resolves differently than the caller saw. 'failed':
-- what the step would store passes the session's storage cap (SWITCHBOARD_MAX_SESSION_BYTES), so none
-- of it is written and the run ends with run_failed saying so (the session stays readable).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua
--!include lib/call.lua
--!include lib/client.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local step, attempt, ack_ms = tonumber(A.step), tonumber(A.attempt), tonumber(A.ack_ms)
local retention = tonumber(A.retention_ms)
local current, refused = sb_step_held(S, step, attempt, A.gone_text)
if not current then return refused end
local planned = {}
for i, raw in ipairs(A.calls) do planned[i] = cjson.decode(raw) end
local ncalls = #planned

-- Every registered name must still resolve as the caller saw it before anything is written.
for _, c in ipairs(planned) do
  if c.client_name and (redis.call('HGET', S.names, c.client_name) or '') ~= (c.client_id or '') then
    return sb_reply('retry')
  end
end

local need = #A.message + #A.timing + 2 * SB_ENTRY
for _, c in ipairs(planned) do
  -- A call's payload is kept twice (its event and its record or call stream entry).
  need = need + #c.tool_call + 2 * #(c.payload or '') + #c.error + #(c.approval or '') + #(c.schema or '')
    + 5 * SB_ENTRY + 256
end
local full = sb_room(S.meta, S.now, need, SB_P.cap)
if full then
  sb_end_run(S, 'run_failed', 'the model\'s output was not kept: ' .. sb_full_text(full), A.gone_text)
  return sb_reply('failed')
end

if A.usage ~= '' then sb_add_usage(S, cjson.decode(A.usage)) end
redis.call('ZREM', SB_P.steps, S.sid)
sb_append(S, A.message)
local pending, k = 0, 1
local seen = {}
for _, c in ipairs(planned) do
  local call_id, kind, cid, tool, policy = c.call_id, c.kind, c.client_id or '', c.tool, c.policy
  sb_append(S, c.tool_call)
  local outcome, client, stream = 'error', nil, nil
  if kind == 'client' and cid ~= '' then
    client, stream = K.clients[k], K.clients[k + 1]
    k = k + 2
    if sb_holds(client, tool, seen) then outcome = policy end
  elseif kind == 'server' then
    outcome = policy
  end
  S.call_id = call_id
  local rec = {kind = kind, client = cid, run = S.run_id, step = step, tool = tool}
  if kind == 'client' then
    rec.to, rec.hb = c.timeout_ms, c.heartbeat_ms
    if c.on_leave == 'wait' then rec.ol = 1 end
  end
  if c.source then rec.src = c.source end
  if outcome == 'require_approval' then
    rec.name = c.name
    if c.schema then rec.schema = c.schema end
    local remembered = redis.call('HGET', S.meta, SB_REMEMBER .. rec.name)
    if remembered then outcome = sb_remembered(S, call_id, remembered) end
  end
  local payload = c.payload or ''
  if outcome == 'allow' and kind == 'client' then
    sb_dispatch(S, rec, stream, payload, ack_ms, retention)
  elseif outcome == 'allow' or outcome == 'require_approval' then
    if outcome == 'require_approval' then
      rec.state = 'awaiting'
      sb_approval_deadline(S, call_id, rec, c.approval_timeout_ms)
    else
      rec.state = 'queued'
      sb_owe('t|' .. S.sid .. '|' .. call_id)
    end
    if kind == 'client' then rec.dispatch = payload else rec.args = payload end
    sb_put_call(S.meta, S.calls, call_id, rec)
    redis.call('HSET', S.owed, call_id, kind == 'client' and cid or 'server')
    if outcome == 'require_approval' then sb_append(S, c.approval or '') end
  elseif outcome ~= 'denied' then
    sb_append(S, c.error)
  end
  if outcome == 'allow' or outcome == 'require_approval' then pending = pending + 1 end
end
if A.timing ~= '' then sb_append(S, A.timing) end

if ncalls == 0 then
  -- Input that steered the run while this step ran has not been answered yet: one more step.
  if redis.call('LLEN', S.inbox) > 0 then
    sb_schedule_step(S, S.run_id, step + 1, 0)
    return sb_reply('continue')
  end
  sb_end_run(S, 'run_completed', nil, A.gone_text)
  return sb_reply('completed')
end
if pending == 0 then
  sb_schedule_step(S, S.run_id, step + 1, 0)
  return sb_reply('continue')
end
redis.call('HSET', S.run, 'state', 'waiting', 'pending', pending)
return sb_reply('waiting')
