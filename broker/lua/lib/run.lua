-- Library: the context of the scripts that act on a session's run. Needs lib/core.lua. Every script that
-- includes it takes this KEYS and ARGV layout, then its own keys from KEYS[10] and ARGV from 4 on:
--
-- KEYS[1] meta  KEYS[2] events  KEYS[3] run  KEYS[4] inbox  KEYS[5] calls  KEYS[6] owed  KEYS[7] names
-- KEYS[8] deadlines (global)  KEYS[9] continuations (global)
-- ARGV[1] channel  ARGV[2] session id  ARGV[3] run id ('' when acting on whichever run is active)

local function sb_run_context()
  return {
    meta = KEYS[1], events = KEYS[2], run = KEYS[3], inbox = KEYS[4], calls = KEYS[5], owed = KEYS[6],
    names = KEYS[7], deadlines = KEYS[8], continuations = KEYS[9], channel = ARGV[1], sid = ARGV[2],
    run_id = ARGV[3], now = sb_now_ms(),
  }
end

-- The active run's step state when it is `run_id` at `step`, else nil (a stale or duplicate job).
local function sb_current_step(S, step)
  local run = redis.call('HMGET', S.run, 'run_id', 'step', 'state', 'cancel', 'started')
  if run[1] ~= S.run_id or tonumber(run[2]) ~= step then return nil end
  return {state = run[3], cancel = run[4] == '1', started = run[5] == '1'}
end
