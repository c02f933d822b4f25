-- Accepts user input: a new run (message_user, run_queued, step 0 owed a job) when none is active, else
-- the input waits in the inbox to steer the active run at its next step.
--
-- KEYS and ARGV[1..3]: the layout of lib/run.lua (ARGV[3] is the id a new run takes).
-- ARGV[4] input id  ARGV[5] message_user JSON for a new run  ARGV[6] message_user JSON for steering
-- Returns {0, 'new_run' | 'steered', run id, continuation member or ''}; {404, msg} no session.
-- The same run id or input id again (a retried request) changes nothing and answers the same.

--!include lib/core.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse(404, 'session') end
local active = redis.call('HGET', S.run, 'run_id')
if active == S.run_id then return sb_reply('new_run', active, '') end
if active then
  if redis.call('HSETNX', S.run, 'in:' .. ARGV[4], '1') == 1 then
    redis.call('RPUSH', S.inbox, ARGV[6])
  end
  return sb_reply('steered', active, '')
end
redis.call('HSET', S.run, 'run_id', S.run_id, 'cancel', '0', 'started', '0', 'created_at', S.now)
sb_append(S, ARGV[5])
sb_append(S, sb_run_event('run_queued', S.run_id))
return sb_reply('new_run', S.run_id, sb_schedule_step(S, S.run_id, 0))
