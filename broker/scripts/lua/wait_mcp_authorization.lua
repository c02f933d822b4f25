-- A step that needs the person to sign in to one or more of its grants' servers waits for them, held by
-- no worker: its lease goes, the run is `waiting` (as on an approval), and each sign-in still pending names
-- the run (`wait`) and has a timer at its end (`expires_at`, in the deadlines index as
-- `<sid>:<prefix><id>`). Its completion, its decline or that timer queues the step again once the last
-- one ended (lib/run.lua sb_sign_in_ended). A sign-in that ended before this ran is not waited on: with
-- none left, the step is queued again at once. A cancel asked for meanwhile ends the run instead.
--
--!layout lib/run.lua
--!key authorizations  the session's MCP sign-ins
--!arg step            the step
--!arg attempt         its try
--!arg gone_text       text for run_gone
--!arg prefix          what a sign-in's id follows in its deadline member
--!arg ids...          the sign-ins the step waits on
--
-- Returns {'ok', 'waiting' | 'queued' | 'cancelled' | 'stale'}; refusal not_found. 'stale': the step is no
-- longer this try's (reclaimed, or waiting already).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local step, attempt = tonumber(A.step), tonumber(A.attempt)
local current = sb_current_step(S, step, attempt)
if not current or current.state ~= 'running' then return sb_reply('stale') end
if current.cancel then
  sb_end_run(S, 'run_cancelled', nil, A.gone_text)
  return sb_reply('cancelled')
end
redis.call('ZREM', SB_P.steps, S.sid)
local pending, seen = 0, {}
for _, id in ipairs(A.ids) do
  local raw = not seen[id] and string.sub(id, 1, 2) ~= 'g:' and redis.call('HGET', K.authorizations, id)
  seen[id] = true
  local rec = raw and cjson.decode(raw)
  if rec and rec.state == 'pending' and tonumber(rec.expires_at) > S.now then
    rec.wait = S.run_id
    redis.call('HSET', K.authorizations, id, cjson.encode(rec))
    sb_timer(SB_P.deadlines, tonumber(rec.expires_at), S.sid .. ':' .. A.prefix .. id)
    pending = pending + 1
  end
end
if pending == 0 then
  sb_schedule_step(S, S.run_id, step, attempt + 1)
  return sb_reply('queued')
end
redis.call('HSET', S.run, 'state', 'waiting', 'pending', pending, 'sw', attempt)
return sb_reply('waiting')
