-- Library: the context of the scripts that act on a session's run. Needs lib/core.lua and
-- lib/partition.lua. A script that takes `--!layout lib/run.lua` is handed these first:
--
--!key meta      the session's record (hash)
--!key events    its event log (stream)
--!key run       its active run (hash)
--!key inbox    input steering the active run (list)
--!key calls     its call records (hash)
--!key owed      the calls still owed an answer (hash)
--!key names    its registrations by name (hash)
--!key queue    input waiting for a run (list)
--!arg channel  the session's live channel
--!arg sid      the session id
--!arg run_id   the run acted on ('' when acting on whichever run is active)

local function sb_run_context()
  return {
    meta = K.meta, events = K.events, run = K.run, inbox = K.inbox, calls = K.calls, owed = K.owed,
    names = K.names, queue = K.queue, channel = A.channel, sid = A.sid, run_id = A.run_id, now = sb_now_ms(),
  }
end

-- The active run's step state when it is `run_id` at `step` try `attempt`, else nil (a stale job).
local function sb_current_step(S, step, attempt)
  local run = redis.call('HMGET', S.run, 'run_id', 'step', 'attempt', 'state', 'cancel', 'started', 'lease_until')
  if run[1] ~= S.run_id or tonumber(run[2]) ~= step or tonumber(run[3]) ~= attempt then return nil end
  return {state = run[4], cancel = run[5] == '1', started = run[6] == '1', lease_until = tonumber(run[7] or 0)}
end

-- The step's worker holds it until lease_until; past that the sweeper may give it to another worker.
local function sb_hold_step(S, lease_ms)
  redis.call('HSET', S.run, 'lease_until', S.now + lease_ms)
  sb_timer(SB_P.steps, S.now + lease_ms, S.sid)
end


-- A step that needs sign-ins waits for them held by no worker (wait_mcp_authorization.lua): the run is
-- `waiting` with `pending` the sign-ins it waits on and `sw` the step's try, and each sign-in's record
-- names the run in `wait`. A sign-in that ends (completed, declined, run out: `rec`, its record as it was
-- while pending) counts the run down; the last queues the step again as its next try, for any worker,
-- which finds the grant's token, or tells the model why there is none. Needs lib/calls.lua.
local function sb_sign_in_ended(S, rec)
  if not rec.wait then return end
  local run = redis.call('HMGET', S.run, 'run_id', 'state', 'sw', 'step')
  if run[1] ~= rec.wait or run[2] ~= 'waiting' or not run[3] then return end
  if redis.call('HINCRBY', S.run, 'pending', -1) > 0 then return end
  redis.call('HDEL', S.run, 'sw')
  sb_schedule_step(S, run[1], tonumber(run[4]), tonumber(run[3]) + 1)
end
