-- A worker starts try `attempt` of step `step`: `run_started` on the first step, steering input folded in
-- as message_user events, the step held under a lease the worker renews. A cancel asked for in the
-- meantime ends the run instead, and so does reaching the step limit.
--
--!layout lib/run.lua
--!arg step        the step
--!arg attempt     its try
--!arg max_steps   the run's limit of model steps
--!arg lease_ms    the step's lease (ms)
--!arg gone_text   text for run_gone
--!arg entry       the work entry that brought the step ('' for none): done with, whatever the outcome
--!arg trace       the run's trace id ('' untraced): on run_started, and kept for the run's end event
--
-- Returns {'ok', 'run' | 'stale' | 'ended'}; refusal not_found. 'stale': another worker has this step (a
-- duplicate take, a late retry of a reclaimed try, or a worker that still holds its lease).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
sb_work_done(A.entry)
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local step, attempt, max_steps = tonumber(A.step), tonumber(A.attempt), tonumber(A.max_steps)
local current = sb_current_step(S, step, attempt)
if not current then return sb_reply('stale') end
-- `running` again: the same try taken again after its worker died; taken only once its lease lapsed.
local free = current.state == 'queued' or (current.state == 'running' and current.lease_until <= S.now)
if not free then return sb_reply('stale') end
local trace = A.trace ~= '' and A.trace or nil
if trace then redis.call('HSET', S.run, 'trace', trace) end
if current.cancel then
  sb_end_run(S, 'run_cancelled', nil, A.gone_text)
  return sb_reply('ended')
end
if step >= max_steps then
  sb_end_run(S, 'run_failed', 'the run reached its limit of ' .. max_steps .. ' model steps', A.gone_text)
  return sb_reply('ended')
end
if not current.started then sb_append(S, sb_ev_run_started(S.run_id, trace)) end
local steering = redis.call('LRANGE', S.inbox, 0, -1)
redis.call('DEL', S.inbox)
for _, raw in ipairs(steering) do
  sb_add(S.meta, -(#raw + SB_ENTRY))
  local input = cjson.decode(raw)
  sb_append(S, sb_input_message(input.text, input.source, input.trigger, input.schedule_id))
end
redis.call('HSET', S.run, 'state', 'running', 'started', '1')
sb_hold_step(S, tonumber(A.lease_ms))
return sb_reply('run')
