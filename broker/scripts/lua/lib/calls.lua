-- Library: settling calls, ending runs and starting the next one. Needs lib/core.lua before it.
--
-- A call record (a field of S.calls, JSON) holds: kind (client | server), client (the registration it is
-- bound to; '' for a server call), run, step, tool (raw), state (awaiting | dispatched | acked | queued |
-- running | parked | answered | failed | denied; `parked`: a grant's call no worker holds between two
-- requests, park_server_call.lua), reason, ack (the acked event), tag (the answer's idempotency
-- tag), dispatch (the client_tool_dispatched body an approval sends), args (a server call's arguments),
-- ato and expires (an approval's deadline: its length and when it runs out, ms; lib/call.lua).
-- The active run (hash S.run) holds: run_id, step, attempt, state (queued | running | waiting | ending),
-- pending (calls of the step not yet settled), cancel, started, created_at, lease_until, reclaims, scoped
-- (ids of its run-scoped registrations, space separated). Waiting input (list S.queue) holds JSON entries
-- {run_id, input_id, text, source, at, scoped, trigger?, schedule_id?}, each marked in S.meta under SB_QUEUED and its run id.

local SB_QUEUED = 'queued:'

-- The `message_user` of input: its text as one text block; `trigger` and `schedule_id` (nil for none)
-- say a schedule posted it.
local function sb_input_message(text, source, trigger, schedule_id)
  return sb_ev_message_user(sb_rec_message_body('user', '[' .. sb_rec_text_block(text) .. ']'), source, trigger,
    schedule_id)
end

-- The error `tool_result` of a call that gets no answer: `text` says why.
local function sb_error_result(call_id, text)
  return sb_ev_tool_result(call_id, '[' .. sb_rec_text_block(text) .. ']', true)
end

-- Waiting input leaves the queue: its mark and what it counted go.
local function sb_dequeued(S, raw, entry)
  redis.call('HDEL', S.meta, SB_QUEUED .. entry.run_id)
  sb_add(S.meta, -(#raw + #entry.run_id + 2 * SB_ENTRY))
end

local SB_GONE_TEXT = {
  departed = 'the client left before answering',
  timed_out = 'the client stopped pinging and its registration lapsed before it answered',
}

-- Marks step `step` (try `attempt`) of the run as owed a job; the job id carries both, so a step retried
-- after its worker died is a new job and the dead one's late duplicate finds itself stale.
local function sb_schedule_step(S, run_id, step, attempt)
  redis.call('HSET', S.run, 'state', 'queued', 'step', step, 'attempt', attempt, 'pending', 0)
  sb_owe('s|' .. S.sid .. '|' .. run_id .. '|' .. step .. '|' .. attempt)
end

-- A call of a tool declared `on_leave: "wait"` (record field `ol`) whose registration leaves, lapses or
-- drops the tool waits (state `waiting`) for the next registration of that name offering the tool. The
-- calls waiting for a name are listed in S.meta under SB_WAITING and the name (a JSON array of call ids,
-- oldest first): every script that may settle a call holds S.meta, so a settled call leaves the list in
-- the same step, and a registration taking a name reads that name's calls only.
local SB_WAITING = 'waiting:'

-- The ids of the calls waiting for `name` (a list, maybe empty) and the field's text (nil for none).
local function sb_waiting_ids(S, name)
  local raw = redis.call('HGET', S.meta, SB_WAITING .. name)
  if not raw then return {}, nil end
  return cjson.decode(raw), raw
end

-- Writes the list of calls waiting for `name` (`raw`: the text it replaces, nil for none), counting the
-- change toward the session's storage.
local function sb_set_waiting(S, name, ids, raw)
  local field = SB_WAITING .. name
  local before = raw and (#field + #raw + SB_ENTRY) or 0
  if #ids == 0 then
    if raw then redis.call('HDEL', S.meta, field) end
    sb_add(S.meta, -before)
    return
  end
  local json = cjson.encode(ids)
  redis.call('HSET', S.meta, field, json)
  sb_add(S.meta, #field + #json + SB_ENTRY - before)
end

-- A waiting call leaves its name's list (it settles, or a registration takes it).
local function sb_unwait(S, call_id, name)
  local ids, raw = sb_waiting_ids(S, name)
  local kept = {}
  for _, id in ipairs(ids) do
    if id ~= call_id then kept[#kept + 1] = id end
  end
  if #kept ~= #ids then sb_set_waiting(S, name, kept, raw) end
end

-- A call's open input requests (record field `iro`: their ids, lib/call.lua) end with it, or when it goes
-- back to waiting for its client: nobody is left to read their answers. Each ends with `input_provided`
-- (action cancel, and `reason`), which closes its inbox item and tells the asking client. Their entries in
-- the session's inputs hash are left as they are: a reader takes an open entry whose call no longer lists
-- it as ended (broker/services/inputs.py), so the scripts that settle calls need not hold that hash.
local function sb_end_inputs(S, call_id, rec, reason)
  for _, id in ipairs(rec.iro) do
    sb_append(S, sb_ev_input_provided(id, call_id, rec.client, 'cancel', nil, reason))
  end
  rec.iro, rec.pz, rec.pd = nil, nil, nil
end

-- What ending a call's open input requests appends (sb_end_inputs): a script that settles a call and
-- checks its room counts it, or a call holding 4 open requests could take a session past its cap. Each
-- event is measured as it will be written (both reasons are as long), with the seq and created_at the log
-- puts in front of it (sb_append: under 80 bytes).
local function sb_end_inputs_bytes(call_id, rec)
  local need = 0
  for _, id in ipairs(rec.iro or {}) do
    need = need + #sb_ev_input_provided(id, call_id, rec.client, 'cancel', nil, 'call_settled') + 80 + SB_ENTRY
  end
  return need
end

-- Records the outcome and, when this was the last unsettled call of the active step, schedules the next
-- step: the barrier that makes a run continue exactly once after parallel calls and approvals.
-- Reads S.calls, S.owed, S.run.
local function sb_settle(S, call_id, rec, state, reason)
  if rec.state == 'waiting' then sb_unwait(S, call_id, rec.cname) end
  if rec.iro then sb_end_inputs(S, call_id, rec, 'call_settled') end
  rec.state = state
  rec.reason = reason
  if rec.src == 'mcp' then
    -- An MCP task is read from its record alone: when it settled, and the seq of its `tool_result`
    -- (appended by every caller just before settling), so its result is one log read, not a scan.
    rec.fin, rec.rs = S.now, sb_use_get(sb_usage(S.meta), 'seq')
  end
  rec.dispatch = nil
  rec.args = nil
  sb_put_call(S.meta, S.calls, call_id, rec)
  redis.call('HDEL', S.owed, call_id)
  redis.call('ZREM', SB_P.deadlines, S.sid .. ':' .. call_id)
  local run = redis.call('HMGET', S.run, 'run_id', 'step', 'state')
  if run[1] ~= rec.run or tonumber(run[2]) ~= rec.step or run[3] ~= 'waiting' then return end
  if redis.call('HINCRBY', S.run, 'pending', -1) > 0 then return end
  sb_schedule_step(S, rec.run, rec.step + 1, 0)
end

-- Fails one unsettled call with an error result the model reads. A dispatched client call says why first
-- (`client_tool_failed`, with `detail` when one is given: an extension the SDK ignores); a call still
-- awaiting approval is resolved as denied, so no tab keeps asking. Returns the `client_tool_failed` event
-- when there was one.
local function sb_fail_call(S, call_id, rec, reason, text, detail)
  local failed = nil
  if rec.state == 'awaiting' then
    sb_append(S, sb_ev_approval_resolved(call_id, 'deny', text, nil))
  elseif rec.kind == 'client' then
    sb_count('calls_failed:' .. reason)
    local seq
    failed, seq = sb_append(S, sb_ev_client_tool_failed(rec.client, call_id, reason, detail))
    -- The failure of a call that waited for its client closes the inbox's item: a notice for it alone
    -- (client_tool_failed is not notable by type; most calls never waited).
    if rec.state == 'waiting' then SB_NOTICE.leave(S.sid, seq) end
  end
  -- A grant's call following a task (record field `gt`, park_server_call.lua) may be held by no worker:
  -- a cancel of it at the server is owed as work (`cx`), which begin_server_call.lua hands a worker.
  if rec.kind == 'server' and rec.gt and rec.gt.task then
    rec.gt.cx = 1
    sb_owe('t|' .. S.sid .. '|' .. call_id)
  end
  sb_append(S, sb_error_result(call_id, text))
  sb_settle(S, call_id, rec, 'failed', reason)
  return failed
end

-- Makes a dispatched or acked call of a tool declared on_leave 'wait' wait for the next registration of
-- `name` offering its tool (its registration left, lapsed or dropped the tool): no ack or result deadline
-- runs, only the tool's timeout (or the deployment's result deadline, S.result_ms) counted from its first
-- dispatch, which fails it with client_gone (expire_call.lua); a call whose time is up already fails so
-- now, saying `text`. `pool` ({stream, group}, or nil when the stream is gone) settles the call's entry in
-- the old registration's pool, so none of its members holds it. Appends `client_tool_waiting`.
local function sb_park(S, call_id, rec, name, text, pool)
  local due = (rec.fd or S.now) + (rec.to or S.result_ms)
  if due <= S.now then return sb_fail_call(S, call_id, rec, 'client_gone', text) end
  if pool and rec.entry and rec.member then redis.call('XACK', pool[1], pool[2], rec.entry) end
  if rec.iro then sb_end_inputs(S, call_id, rec, 'call_waiting') end
  rec.pd = nil
  rec.state, rec.cname, rec.ws = 'waiting', name, S.now
  rec.entry, rec.member, rec.acked_ms, rec.ack_seq, rec.ack = nil, nil, nil, nil, nil
  sb_put_call(S.meta, S.calls, call_id, rec)
  local ids, raw = sb_waiting_ids(S, name)
  ids[#ids + 1] = call_id
  sb_set_waiting(S, name, ids, raw)
  -- The same index entry as the ack or result deadline it replaces.
  sb_timer(SB_P.deadlines, due, S.sid .. ':' .. call_id)
  sb_count('calls_waiting')
  sb_append(S, sb_ev_client_tool_waiting(call_id, rec.tool, name, sb_iso(S.now * 1000), sb_iso(due * 1000),
    rec.run ~= '' and rec.run or nil))
end

-- Fails every unsettled call whose record field `field` equals `value` (a client id or a run id).
local function sb_fail_owed(S, field, value, reason, text)
  local owed = redis.call('HGETALL', S.owed)
  for i = 1, #owed, 2 do
    local raw = redis.call('HGET', S.calls, owed[i])
    if raw then
      local rec = sb_read_call(S.calls, owed[i], raw)
      if rec[field] == value then sb_fail_call(S, owed[i], rec, reason, text) end
    end
  end
end

-- Ends a registration: the name is released, the lease dropped, `client_left` appended, and the calls it
-- still owes fail with `client_gone`, but for those of a tool declared on_leave 'wait', which wait for
-- the next registration of its name (sb_park). What is left of it is what a late request reads (its
-- state, name and lease fields), kept for S.departed_ms; its tool list and call stream go now (a departed
-- registration is offered to no step and handed no call). Reads S.client, S.client_calls, S.names,
-- S.result_ms and the settle fields.
local function sb_client_gone(S, cid, reason)
  local found = redis.call('HMGET', S.client, 'name', 'bl')
  local name = found[1]
  redis.call('HSET', S.client, 'state', 'left', 'left_reason', reason)
  redis.call('HDEL', S.client, 'tools', 'tool_names', 'lifetime', 'bt', 'bl')
  redis.call('PEXPIRE', S.client, S.departed_ms)
  redis.call('DEL', S.client_calls)
  sb_add(S.meta, -(tonumber(found[2]) or 0))
  sb_count('clients_active', -1)
  if name and redis.call('HGET', S.names, name) == cid then
    redis.call('HDEL', S.names, name)
  end
  redis.call('ZREM', SB_P.leases, S.sid .. ':' .. cid)
  sb_append(S, sb_ev_client_left(cid, reason))
  local text = SB_GONE_TEXT[reason]
  local owed = redis.call('HGETALL', S.owed)
  for i = 1, #owed, 2 do
    -- An owed client call's entry holds the id of the registration it went to.
    local raw = owed[i + 1] == cid and redis.call('HGET', S.calls, owed[i])
    local rec = raw and sb_read_call(S.calls, owed[i], raw)
    if rec and rec.client == cid and rec.state ~= 'waiting' then
      if rec.ol and name and (rec.state == 'dispatched' or rec.state == 'acked') then
        sb_park(S, owed[i], rec, name, text, nil)
      else
        sb_fail_call(S, owed[i], rec, 'client_gone', text)
      end
    end
  end
end

-- Run-scoped registrations leave with their run: owed as work, since their keys are not in this script's
-- KEYS.
local function sb_release_scoped(S, scoped)
  for cid in string.gmatch(scoped or '', '%S+') do sb_owe('d|' .. S.sid .. '|' .. cid) end
end

-- Makes `run_id` the active run and schedules its first step.
local function sb_start_run(S, run_id, scoped)
  sb_count('runs_started')
  sb_count('runs_active')
  redis.call('HSET', S.run, 'run_id', run_id, 'cancel', '0', 'started', '0', 'created_at', S.now,
    'scoped', scoped or '', 'reclaims', 0)
  sb_schedule_step(S, run_id, 0, 0)
end

-- Starts what waits in the queue, by the session's policy (think-reference.md section 5): `queue` takes
-- the oldest; `latest` cancels all but the newest, whose run still sees every superseded message; `merge`
-- cancels all but the newest and folds every text into its one message; `debounce` is `latest` once no
-- input has come for debounce_ms (until then a timer in S.dequeue waits).
local function sb_start_next(S)
  if redis.call('LLEN', S.queue) == 0 then return end
  local policy = redis.call('HGET', S.meta, 'policy') or 'queue'
  if policy == 'debounce' then
    local newest = cjson.decode(redis.call('LINDEX', S.queue, -1))
    local due = newest.at + tonumber(redis.call('HGET', S.meta, 'debounce_ms') or 750)
    if due > S.now then
      sb_timer(SB_P.dequeue, due, S.sid)
      return
    end
  end
  if policy ~= 'latest' and policy ~= 'merge' and policy ~= 'debounce' then
    local raw = redis.call('LPOP', S.queue)
    local entry = cjson.decode(raw)
    sb_dequeued(S, raw, entry)
    sb_append(S, sb_input_message(entry.text, entry.source, entry.trigger, entry.schedule_id))
    sb_start_run(S, entry.run_id, entry.scoped)
    return
  end
  local entries = redis.call('LRANGE', S.queue, 0, -1)
  redis.call('DEL', S.queue)
  local last = cjson.decode(entries[#entries])
  sb_dequeued(S, entries[#entries], last)
  local texts = {}
  for i = 1, #entries - 1 do
    local entry = cjson.decode(entries[i])
    sb_dequeued(S, entries[i], entry)
    if policy == 'merge' then
      texts[#texts + 1] = entry.text
    else
      sb_append(S, sb_input_message(entry.text, entry.source, entry.trigger, entry.schedule_id))
    end
    sb_append(S, sb_ev_run_cancelled(entry.run_id))
    sb_count('runs_ended:run_cancelled')
    sb_release_scoped(S, entry.scoped)
  end
  texts[#texts + 1] = last.text
  sb_append(S, sb_input_message(table.concat(texts, '\n\n'), last.source, last.trigger, last.schedule_id))
  sb_start_run(S, last.run_id, last.scoped)
end

-- The token counts a run reports, in the order its end reads them; the run hash keeps each as `u:<name>`.
local SB_USAGE = {'input_tokens', 'output_tokens', 'cached_input_tokens', 'reasoning_tokens'}

-- Adds a step's token counts (a table of SB_USAGE names to counts) to the run's. The caller bounds
-- each below 2^40 (workers/models/base.py); one that is not a whole number in that range is left out
-- rather than fail HINCRBY midway through a step's writes.
local function sb_add_usage(S, usage)
  for _, name in ipairs(SB_USAGE) do
    local n = tonumber(usage[name])
    if n and n >= 0 and n < 1099511627776 and n == math.floor(n) then
      redis.call('HINCRBY', S.run, 'u:' .. name, string.format('%d', n))
    end
  end
end

-- The run's token counts (`counts` from `first` on, read in SB_USAGE's order, which is TokenUsage's) as
-- its JSON, or nil when no step reported any (the scripted model's runs). HMGET reads a count never added
-- as false, which the builder must be given as nil to leave it out.
local function sb_usage_json(counts, first)
  local input, output, cached, reasoning = counts[first] or nil, counts[first + 1] or nil,
    counts[first + 2] or nil, counts[first + 3] or nil
  if not (input or output or cached or reasoning) then return nil end
  return sb_rec_token_usage(input, output, cached, reasoning)
end

-- Ends the active run with `outcome` (run_completed | run_failed | run_cancelled): its owed calls fail
-- with `run_gone` first, then the terminal event and the run's timing; steering input not yet read goes
-- with it; its run-scoped registrations are released; and whatever waits in the queue starts.
-- Reads S.run, S.inbox and the fields of sb_settle and sb_start_next. Returns the run id.
local function sb_end_run(S, outcome, err, gone_text)
  local run = redis.call('HMGET', S.run, 'run_id', 'step', 'attempt', 'scoped', 'created_at', 'in_bytes',
    'u:input_tokens', 'u:output_tokens', 'u:cached_input_tokens', 'u:reasoning_tokens', 'trace')
  -- An extension: what the run's model steps counted, on run_completed and the run's timing.
  local usage = sb_usage_json(run, 7)
  local run_id = run[1]
  -- An extension: the run's trace id, kept by begin_step.lua when the deployment traces.
  local trace = run[11] or nil
  redis.call('HSET', S.run, 'state', 'ending')
  sb_count('runs_active', -1)
  sb_count('runs_ended:' .. outcome)
  sb_fail_owed(S, 'run', run_id, 'run_gone', gone_text)
  redis.call('ZREM', SB_P.steps, S.sid)
  if outcome == 'run_failed' then
    sb_append(S, sb_ev_run_failed(run_id, err, trace))
  elseif outcome == 'run_completed' then
    sb_append(S, sb_ev_run_completed(run_id, usage, trace))
  else
    sb_append(S, sb_ev_run_cancelled(run_id, trace))
  end
  -- The payload is the run's timing record, not an event: a `custom` event carries any object.
  sb_append(S, sb_ev_custom('timing', '{"scope":"run","run_id":' .. sb_str(run_id) .. ',"outcome":"' .. outcome
    .. '","steps":' .. (tonumber(run[2]) + 1) .. ',"total_ms":' .. (S.now - tonumber(run[5]))
    .. (usage and (',"usage":' .. usage) or '') .. '}'))
  sb_release_scoped(S, run[4])
  -- Steering input the run never read leaves with it.
  for _, raw in ipairs(redis.call('LRANGE', S.inbox, 0, -1)) do sb_add(S.meta, -(#raw + SB_ENTRY)) end
  -- So do the ids of the input it was steered with (post_input.lua counts them in `in_bytes`).
  if run[6] then sb_add(S.meta, -tonumber(run[6])) end
  redis.call('DEL', S.run, S.inbox)
  sb_start_next(S)
  return run_id
end
