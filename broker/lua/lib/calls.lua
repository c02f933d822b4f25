-- Library: settling client calls and ending runs. Needs lib/core.lua before it.
--
-- A call record (a field of S.calls, JSON) holds: client, run, step, tool (raw), name (model-visible),
-- state (dispatched | acked | answered | failed), reason, ack (the acked event), tag (the answer's
-- idempotency tag). The active run (hash S.run) holds: run_id, step, state (queued | running | waiting |
-- ending), pending (calls of the step not yet settled), cancel, started.

local SB_GONE_TEXT = {
  departed = 'the client left before answering',
  timed_out = 'the client stopped pinging and its registration lapsed before it answered',
}

-- Marks the run's next step as owed a job. The member stays in S.continuations until the job is
-- enqueued, so a process that dies in between leaves it for the sweeper.
local function sb_schedule_step(S, run_id, step)
  redis.call('HSET', S.run, 'state', 'queued', 'step', step, 'pending', 0)
  local member = S.sid .. ':' .. run_id .. ':' .. step
  redis.call('ZADD', S.continuations, S.now, member)
  return member
end

-- Records the outcome and, when this was the last unsettled call of the active step, schedules the next
-- step: the barrier that makes a run continue exactly once after parallel calls.
-- Reads S.calls, S.owed, S.deadlines, S.run, S.continuations, S.sid, S.now.
local function sb_settle(S, call_id, rec, state, reason)
  rec.state = state
  rec.reason = reason
  redis.call('HSET', S.calls, call_id, cjson.encode(rec))
  redis.call('HDEL', S.owed, call_id)
  redis.call('ZREM', S.deadlines, S.sid .. ':' .. call_id)
  local run = redis.call('HMGET', S.run, 'run_id', 'step', 'state')
  if run[1] ~= rec.run or tonumber(run[2]) ~= rec.step or run[3] ~= 'waiting' then return false end
  if redis.call('HINCRBY', S.run, 'pending', -1) > 0 then return false end
  return sb_schedule_step(S, rec.run, rec.step + 1)
end

-- Fails one unsettled call: `client_tool_failed`, then a `tool_result` the model reads as an error.
local function sb_fail_call(S, call_id, rec, reason, text)
  sb_append(S, '{"type":"client_tool_failed","client_id":' .. sb_str(rec.client) .. ',"call_id":'
    .. sb_str(call_id) .. ',"reason":"' .. reason .. '"}')
  sb_append(S, sb_tool_result(call_id, text, true))
  return sb_settle(S, call_id, rec, 'failed', reason)
end

-- Fails every unsettled call whose record field `field` equals `value` (a client id or a run id).
-- Returns the continuation member the last settle scheduled, or false.
local function sb_fail_owed(S, field, value, reason, text)
  local owed = redis.call('HGETALL', S.owed)
  local scheduled = false
  for i = 1, #owed, 2 do
    local raw = redis.call('HGET', S.calls, owed[i])
    if raw then
      local rec = cjson.decode(raw)
      if rec[field] == value then
        scheduled = sb_fail_call(S, owed[i], rec, reason, text) or scheduled
      end
    end
  end
  return scheduled
end

-- Ends a registration: the name is released, the lease dropped, `client_left` appended, and the calls it
-- still owes fail with `client_gone`. Reads S.client, S.lease, S.names, S.leases and the settle fields.
local function sb_client_gone(S, cid, reason)
  local name = redis.call('HGET', S.client, 'name')
  redis.call('HSET', S.client, 'state', 'left', 'left_reason', reason)
  if name and redis.call('HGET', S.names, name) == cid then
    redis.call('HDEL', S.names, name)
  end
  redis.call('DEL', S.lease)
  redis.call('ZREM', S.leases, S.sid .. ':' .. cid)
  sb_append(S, '{"type":"client_left","client_id":' .. sb_str(cid) .. ',"reason":"' .. reason .. '"}')
  return sb_fail_owed(S, 'client', cid, 'client_gone', SB_GONE_TEXT[reason])
end

-- Ends the active run with `outcome` (run_completed | run_failed | run_cancelled): its owed calls fail
-- with `run_gone` first, then the terminal event; steering input not yet read goes with it.
-- Reads S.run, S.inbox and the settle fields. Returns the run id.
local function sb_end_run(S, outcome, err, gone_text)
  local run = redis.call('HMGET', S.run, 'run_id', 'step')
  local run_id = run[1]
  redis.call('HSET', S.run, 'state', 'ending')
  sb_fail_owed(S, 'run', run_id, 'run_gone', gone_text)
  redis.call('ZREM', S.continuations, S.sid .. ':' .. run_id .. ':' .. run[2])
  if outcome == 'run_failed' then
    sb_append(S, '{"type":"run_failed","run_id":' .. sb_str(run_id) .. ',"error":' .. sb_str(err) .. '}')
  else
    sb_append(S, sb_run_event(outcome, run_id))
  end
  redis.call('DEL', S.run, S.inbox)
  return run_id
end
