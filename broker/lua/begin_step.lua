-- A worker starts step ARGV[4] of the run: `run_started` on the first step, steering input folded in as
-- message_user events, the run marked running. A cancel asked for in the meantime ends the run instead.
--
-- KEYS and ARGV[1..3]: the layout of lib/run.lua.  ARGV[4] step  ARGV[5] text for run_gone
-- Returns {0, 'run' | 'stale' | 'cancelled'}; {404, msg} no session. 'stale' means another job already
-- took this step further (a duplicate or late job), and the caller does nothing.

--!include lib/core.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse(404, 'session') end
local step = tonumber(ARGV[4])
local current = sb_current_step(S, step)
-- `running` again is a retry of a step whose worker died before committing: it runs again.
if not current or (current.state ~= 'queued' and current.state ~= 'running') then return sb_reply('stale') end
redis.call('ZREM', S.continuations, S.sid .. ':' .. S.run_id .. ':' .. step)
if current.cancel then
  sb_end_run(S, 'run_cancelled', nil, ARGV[5])
  return sb_reply('cancelled')
end
if not current.started then
  sb_append(S, sb_run_event('run_started', S.run_id))
end
local steering = redis.call('LRANGE', S.inbox, 0, -1)
redis.call('DEL', S.inbox)
for _, message in ipairs(steering) do sb_append(S, message) end
redis.call('HSET', S.run, 'state', 'running', 'started', '1')
return sb_reply('run')
