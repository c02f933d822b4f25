-- Gives a step whose worker stopped renewing its lease to another worker, as a new try. A step reclaimed
-- more than `max_reclaims` times ends the run (run_failed): a turn that makes no progress never loops forever.
--
--!layout lib/run.lua   (run_id is '')
--!arg max_reclaims  the most times a step is reclaimed before the run ends
--!arg gone_text     text for run_gone
--
-- Returns {'ok', 'reclaimed' | 'alive' | 'gone'}, or {'ok', 'ended', run_id} (the run it ended).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
local run = redis.call('HMGET', S.run, 'run_id', 'step', 'attempt', 'state', 'lease_until', 'reclaims')
if not run[1] or run[4] ~= 'running' or not sb_session_live(S) then
  redis.call('ZREM', SB_P.steps, S.sid)
  return sb_reply('gone')
end
if tonumber(run[5] or 0) > S.now then
  sb_timer(SB_P.steps, tonumber(run[5]), S.sid)
  return sb_reply('alive')
end
local reclaims = redis.call('HINCRBY', S.run, 'reclaims', 1)
redis.call('ZREM', SB_P.steps, S.sid)
if reclaims > tonumber(A.max_reclaims) then
  sb_end_run(S, 'run_failed', 'the worker running step ' .. run[2] .. ' stopped ' .. (reclaims)
    .. ' times; the run gives up', A.gone_text)
  return sb_reply('ended', run[1])
end
sb_schedule_step(S, run[1], tonumber(run[2]), tonumber(run[3]) + 1)
return sb_reply('reclaimed')
