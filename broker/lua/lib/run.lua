-- Library: the context of the scripts that act on a session's run. Needs lib/core.lua and
-- lib/partition.lua. Every script that includes it takes this KEYS and ARGV layout, then its own keys
-- from KEYS[9] and ARGV from 4 on (and the partition's keys last, lib/partition.lua):
--
-- KEYS[1] meta  KEYS[2] events  KEYS[3] run  KEYS[4] inbox  KEYS[5] calls  KEYS[6] owed  KEYS[7] names
-- KEYS[8] queue
-- ARGV[1] channel  ARGV[2] session id  ARGV[3] run id ('' when acting on whichever run is active)

local function sb_run_context()
  return {
    meta = KEYS[1], events = KEYS[2], run = KEYS[3], inbox = KEYS[4], calls = KEYS[5], owed = KEYS[6],
    names = KEYS[7], queue = KEYS[8], channel = ARGV[1], sid = ARGV[2], run_id = ARGV[3], now = sb_now_ms(),
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

