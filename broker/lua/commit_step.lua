-- Commits a model step atomically: the assistant message, then per tool call its `tool_call` event and
-- what its policy makes of it: `allow` dispatches a client call (call record, the registration's call
-- stream, `client_tool_dispatched`, the ack deadline) or queues a server call for a worker;
-- `require_approval` appends `approval_requested` and waits, with no timer; `deny`, and a tool that no
-- active registration holds, give the model an error result at once. Then the run completes, waits, or
-- (nothing to wait for) owes its next step.
--
-- KEYS and ARGV[1..3]: the layout of lib/run.lua.  KEYS[9..]: per client call with a client id, in
-- order, its client hash and its client call stream.
-- ARGV[4] step  ARGV[5] attempt  ARGV[6] ack deadline ms  ARGV[7] message_assistant JSON
-- ARGV[8] number of calls  ARGV[9] text for run_gone  ARGV[10] call stream retention ms
-- ARGV[11] the step's timing (a custom event JSON, '' for none)
-- then 15 per call, from ARGV[12]: call id, kind ('client' | 'server' | 'none'), client name (a registered
-- name to check, '' for a run-scoped client or none), client id, raw tool name, policy ('allow' |
-- 'require_approval' | 'deny'), tool_call JSON, payload (client_tool_dispatched JSON for a client call,
-- the arguments JSON for a server call), error tool_result JSON (used for deny, or a tool no active
-- registration holds), approval_requested JSON, the tool's result deadline ms ('' for the deployment's),
-- its heartbeat ms ('' for none), the model-visible tool name (a decision remembered for the session
-- under that name decides a `require_approval` call at once: resolve_approval.lua), a server call's
-- source ('' for the deployment's own tools, `mcp:<grant>` for an MCP server's), and the JSON Schema an
-- approver's edited arguments are held to ('' for none: a client tool's is its registration's).
-- Returns {0, 'completed' | 'waiting' | 'continue' | 'cancelled' | 'stale' | 'retry' | 'failed'};
-- {404, 'session'}. 'retry': a registered name now resolves differently than the caller saw. 'failed':
-- what the step would store passes the session's storage cap (SWITCHBOARD_MAX_SESSION_BYTES), so none
-- of it is written and the run ends with run_failed saying so (the session stays readable).

--!layout lib/run.lua
--!include lib/core.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua
--!include lib/call.lua
--!include lib/client.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse(404, 'session') end
local step, attempt, ack_ms, ncalls = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[8])
local retention = tonumber(ARGV[10])
local current = sb_current_step(S, step, attempt)
if not current or current.state ~= 'running' then return sb_reply('stale') end
if current.cancel then
  sb_end_run(S, 'run_cancelled', nil, ARGV[9])
  return sb_reply('cancelled')
end

-- Every registered name must still resolve as the caller saw it before anything is written.
for i = 0, ncalls - 1 do
  local b = 12 + i * 15
  local name, cid = ARGV[b + 2], ARGV[b + 3]
  if name ~= '' and (redis.call('HGET', S.names, name) or '') ~= cid then return sb_reply('retry') end
end

local need = #ARGV[7] + #ARGV[11] + 2 * SB_ENTRY
for i = 0, ncalls - 1 do
  local b = 12 + i * 15
  -- A call's payload is kept twice (its event and its record or call stream entry).
  need = need + #ARGV[b + 6] + 2 * #ARGV[b + 7] + #ARGV[b + 8] + #ARGV[b + 9] + #ARGV[b + 14] + 5 * SB_ENTRY + 256
end
local full = sb_room(S.meta, S.now, need, SB_P.cap)
if full then
  sb_end_run(S, 'run_failed', 'the model\'s output was not kept: ' .. full, ARGV[9])
  return sb_reply('failed')
end

redis.call('ZREM', SB_P.steps, S.sid)
sb_append(S, ARGV[7])
local pending, k = 0, 9
local seen = {}
for i = 0, ncalls - 1 do
  local b = 12 + i * 15
  local call_id, kind, cid, tool, policy = ARGV[b], ARGV[b + 1], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5]
  sb_append(S, ARGV[b + 6])
  local outcome, client, stream = 'error', nil, nil
  if kind == 'client' and cid ~= '' then
    client, stream = KEYS[k], KEYS[k + 1]
    k = k + 2
    if sb_holds(client, tool, seen) then outcome = policy end
  elseif kind == 'server' then
    outcome = policy
  end
  S.call_id = call_id
  local rec = {kind = kind, client = cid, run = S.run_id, step = step, tool = tool}
  if kind == 'client' then rec.to, rec.hb = tonumber(ARGV[b + 10]), tonumber(ARGV[b + 11]) end
  if ARGV[b + 13] ~= '' then rec.src = ARGV[b + 13] end
  if outcome == 'require_approval' then
    rec.name = ARGV[b + 12]
    if ARGV[b + 14] ~= '' then rec.schema = ARGV[b + 14] end
    local remembered = redis.call('HGET', S.meta, SB_REMEMBER .. rec.name)
    if remembered then outcome = sb_remembered(S, call_id, remembered) end
  end
  if outcome == 'allow' and kind == 'client' then
    sb_dispatch(S, rec, stream, ARGV[b + 7], ack_ms, retention)
  elseif outcome == 'allow' or outcome == 'require_approval' then
    if outcome == 'require_approval' then
      rec.state = 'awaiting'
    else
      rec.state = 'queued'
      sb_owe('t|' .. S.sid .. '|' .. call_id)
    end
    if kind == 'client' then rec.dispatch = ARGV[b + 7] else rec.args = ARGV[b + 7] end
    sb_put_call(S.meta, S.calls, call_id, rec)
    redis.call('HSET', S.owed, call_id, kind == 'client' and cid or 'server')
    if outcome == 'require_approval' then sb_append(S, ARGV[b + 9]) end
  elseif outcome ~= 'denied' then
    sb_append(S, ARGV[b + 8])
  end
  if outcome == 'allow' or outcome == 'require_approval' then pending = pending + 1 end
end
if ARGV[11] ~= '' then sb_append(S, ARGV[11]) end

if ncalls == 0 then
  -- Input that steered the run while this step ran has not been answered yet: one more step.
  if redis.call('LLEN', S.inbox) > 0 then
    sb_schedule_step(S, S.run_id, step + 1, 0)
    return sb_reply('continue')
  end
  sb_end_run(S, 'run_completed', nil, ARGV[9])
  return sb_reply('completed')
end
if pending == 0 then
  sb_schedule_step(S, S.run_id, step + 1, 0)
  return sb_reply('continue')
end
redis.call('HSET', S.run, 'state', 'waiting', 'pending', pending)
return sb_reply('waiting')
